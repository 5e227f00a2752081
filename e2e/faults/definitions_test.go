package faults

import (
	"strings"
	"testing"
)

func TestCompareDefinitions(t *testing.T) {
	const base = `{"rabbit_version":"3.13.0","users":[{"name":"a","tags":["x"]},{"name":"b","tags":[]}],
		"queues":[{"name":"q1","vhost":"/","durable":true,"arguments":{"x-max-length":10,"x-a":1}},{"name":"q2","vhost":"/"}]}`
	tests := []struct {
		name  string
		other string
		want  []string // substrings of the error; none: equal
	}{
		{"same", base, nil},
		{"order of items and keys ignored", `{"queues":[{"vhost":"/","name":"q2"},{"arguments":{"x-a":1,"x-max-length":10},"durable":true,"vhost":"/","name":"q1"}],
			"users":[{"tags":[],"name":"b"},{"name":"a","tags":["x"]}],"rabbit_version":"3.13.0"}`, nil},
		{"missing queue", `{"rabbit_version":"3.13.0","users":[{"name":"a","tags":["x"]},{"name":"b","tags":[]}],"queues":[{"name":"q2","vhost":"/"}]}`,
			[]string{`other queues: - {"arguments":{"x-a":1,"x-max-length":10},"durable":true,"name":"q1","vhost":"/"}`}},
		{"extra and changed argument", `{"rabbit_version":"3.13.0","users":[{"name":"a","tags":["x"]},{"name":"b","tags":[]}],
			"queues":[{"name":"q1","vhost":"/","durable":true,"arguments":{"x-max-length":11,"x-a":1}},{"name":"q2","vhost":"/"}]}`,
			[]string{`other queues: + {"arguments":{"x-a":1,"x-max-length":11}`, `other queues: - {"arguments":{"x-a":1,"x-max-length":10}`}},
		{"scalar differs", `{"rabbit_version":"4.0.0","users":[{"name":"a","tags":["x"]},{"name":"b","tags":[]}],"queues":[{"name":"q1","vhost":"/","durable":true,"arguments":{"x-max-length":10,"x-a":1}},{"name":"q2","vhost":"/"}]}`,
			[]string{`other rabbit_version: + "4.0.0"`, `other rabbit_version: - "3.13.0"`}},
		{"duplicate counts", `{"rabbit_version":"3.13.0","users":[{"name":"a","tags":["x"]},{"name":"a","tags":["x"]},{"name":"b","tags":[]}],"queues":[{"name":"q1","vhost":"/","durable":true,"arguments":{"x-max-length":10,"x-a":1}},{"name":"q2","vhost":"/"}]}`,
			[]string{`other users: + {"name":"a","tags":["x"]}`}},
		{"section missing", `{"rabbit_version":"3.13.0","users":[{"name":"a","tags":["x"]},{"name":"b","tags":[]}]}`,
			[]string{`other queues: - {"name":"q2","vhost":"/"}`}},
		{"not JSON", `{"queues":`, []string{"definitions of other"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CompareDefinitions([]string{"first", "other"}, [][]byte{[]byte(base), []byte(tt.other)})
			if tt.want == nil {
				if err != nil {
					t.Fatalf("want equal, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want a difference, got none")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestCompareDefinitionsNamesEachDifferingDocument(t *testing.T) {
	a := []byte(`{"vhosts":[{"name":"/"}]}`)
	b := []byte(`{"vhosts":[{"name":"/"},{"name":"v"}]}`)
	err := CompareDefinitions([]string{"n1", "n2", "n3"}, [][]byte{a, a, b})
	if err == nil || strings.Contains(err.Error(), "n2 ") || !strings.Contains(err.Error(), `n3 vhosts: + {"name":"v"}`) {
		t.Fatalf("got %v; want only n3 reported", err)
	}
	if err := CompareDefinitions([]string{"n1"}, [][]byte{a, b}); err == nil {
		t.Fatal("names and documents of different counts accepted")
	}
}
