package mgmt

import (
	"encoding/json"
	"testing"
)

// FuzzMemberAnswers feeds arbitrary bytes to the decoders of a member's
// answers (peer input): they never panic; decoded items carry the answering
// node and a body that is valid JSON (it is written out as received);
// decoded totals sum into the overview's counters without panicking
// whatever their lengths.
func FuzzMemberAnswers(f *testing.F) {
	for _, s := range []string{
		`[{"k":"/\u0000q","v":"/","b":{"name":"q"}}]`, `[{"k":"c","u":"guest","v":"/","b":null}]`, `[]`, `null`, `[{}]`,
		`{"vhosts":{"/":{"queues":1,"stats":{"c":[1,2,3,4],"r":[0.5]}}},"connections":{"guest":2},"global":{"c":[1],"r":[1,2,3,4,5,6,7,8,9]}}`,
		`{"listeners":[{"node":1}]}`, `{`, `[1,2]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if items, err := decodeItems("warren@n2", data); err == nil {
			for _, it := range items {
				if it.Node != "warren@n2" {
					t.Fatalf("item %+v: node %q", it, it.Node)
				}
				raw, _ := it.Body.(json.RawMessage)
				if !json.Valid(raw) {
					t.Fatalf("item %+v: body not valid JSON", it)
				}
			}
		}
		if tot, err := decodeTotals("warren@n2", data); err == nil {
			q, g, c := newCounts(len(queueStats)), newCounts(len(globalStats)), newCounts(len(churnStats))
			for _, vt := range tot.Vhosts {
				q.add(vt.Stats)
			}
			g.add(tot.Global)
			c.add(tot.Churn)
			_ = withRates(queueStats[:], q.C, q.R)
			_ = withRates(globalStats[:], g.C, g.R)
			_ = withRates(churnStats[:], c.C, c.R)
			sortListeners(tot.Listeners)
		}
	})
}
