// Package config holds the broker's configuration: the YAML file format, its
// embedded defaults, and the WARREN_* environment overrides.
//
// Precedence, lowest to highest: Default(), the YAML file, WARREN_* environment
// variables, command-line flags (applied by cmd/warren). Validate reports every
// invalid setting with its key so a user can fix the file in one pass; for
// TLS it also checks that the certificate, key and CA files can be read and
// loaded (TLS.ServerConfig builds the crypto/tls configuration, reloaded
// when the files change). The
// package has no package-level mutable state; a Config is a plain value.
package config
