//go:build !linux

package procsched

// Apply returns ErrUnsupported: only Linux has per-thread policies.
func Apply(p Policy) error {
	if _, err := ParsePolicy(string(p)); err != nil {
		return err
	}
	return ErrUnsupported
}
