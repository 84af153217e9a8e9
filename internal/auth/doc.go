// Package auth secures gRPC: bearer tokens sent as "authorization: Bearer <token>" metadata
// (PerRPC on the client, interceptors enforcing a per-method Policy on the server, compared
// in constant time) and TLS configurations from PEM files, with optional client
// certificates.
package auth
