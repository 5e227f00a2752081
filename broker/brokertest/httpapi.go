package brokertest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// API calls the node's HTTP API as guest: method on path (e.g.
// "/api/queues/%2F/q"), with body encoded as JSON unless nil, and the
// response decoded into out unless out is nil. It returns the status code
// and fails the test if the request cannot be made or the answer decoded.
func (n *Node) API(t testing.TB, method, path string, body, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, n.HTTPURL()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("guest", "guest")
	if body != nil {
		req.Header.Set("content-type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: decode the answer: %v", method, path, err)
		}
	}
	return resp.StatusCode
}
