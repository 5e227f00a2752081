package procsched

import "testing"

func TestParsePolicy(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Policy
		wantErr bool
	}{
		{"normal", Normal, false},
		{"batch", Batch, false},
		{"", "", true},
		{"fifo", "", true},
		{"Batch", "", true},
	} {
		got, err := ParsePolicy(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParsePolicy(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
	if err := Apply("fifo"); err == nil {
		t.Error("Apply(fifo) succeeded")
	}
}
