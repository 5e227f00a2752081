package message

import (
	"math"
	"testing"
)

func TestFieldInt(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want int64
		ok   bool
	}{
		{"int", 7, 7, true},
		{"int8", int8(-8), -8, true},
		{"int16", int16(300), 300, true},
		{"int32", int32(60000), 60000, true},
		{"int64", int64(math.MinInt64), math.MinInt64, true},
		{"uint8", uint8(255), 255, true},
		{"uint16", uint16(65535), 65535, true},
		{"uint32", uint32(math.MaxUint32), math.MaxUint32, true},
		{"uint64 that fits", uint64(math.MaxInt64), math.MaxInt64, true},
		{"uint64 too large", uint64(math.MaxInt64) + 1, 0, false},
		{"whole float", 60000.0, 60000, true},
		{"fractional float", 1.5, 0, false},
		{"float out of range", 1e19, 0, false},
		{"NaN", math.NaN(), 0, false},
		{"string", "5", 0, false},
		{"bool", true, 0, false},
		{"nil", nil, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := FieldInt(tt.in)
			if got != tt.want || ok != tt.ok {
				t.Errorf("FieldInt(%#v) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
			}
		})
	}
}
