package auth

import (
	"context"
	"crypto/subtle"
	"fmt"
	"os"
	"strings"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// MetadataKey is the gRPC metadata key that carries the bearer token.
const MetadataKey = "authorization"

// bearerPrefix starts the value of the authorization metadata.
const bearerPrefix = "Bearer "

// bearer is the PerRPCCredentials of PerRPC.
type bearer struct {
	token      string
	requireTLS bool
}

// PerRPC returns credentials that send token as "authorization: Bearer <token>" metadata on
// every call. With requireTLS, gRPC refuses to send them over a connection without
// transport security, so the token never crosses the network in the clear.
func PerRPC(token string, requireTLS bool) credentials.PerRPCCredentials {
	return bearer{token: token, requireTLS: requireTLS}
}

// GetRequestMetadata returns the authorization metadata.
func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{MetadataKey: bearerPrefix + b.token}, nil
}

// RequireTransportSecurity reports whether the token may only travel over TLS.
func (b bearer) RequireTransportSecurity() bool { return b.requireTLS }

// Policy returns the tokens accepted for a method, given by its full gRPC name
// ("/gpreduce.v1.Worker/RunTask"). A nil or empty slice means the method needs no token.
type Policy func(fullMethod string) []string

// Static returns a policy accepting the non-empty tokens among tokens for every method.
// With no non-empty token it requires none.
func Static(tokens ...string) Policy {
	var keep []string
	for _, t := range tokens {
		if t != "" {
			keep = append(keep, t)
		}
	}
	return func(string) []string { return keep }
}

// Messages of the Unauthenticated errors.
const (
	missingTokenMsg = "missing bearer token: pass --token or set GPREDUCE_TOKEN"
	wrongTokenMsg   = "wrong token for %s"
)

// check returns nil if the incoming call to method carries a token p accepts, and an
// Unauthenticated status otherwise, logging the rejection.
func check(ctx context.Context, p Policy, log zerolog.Logger, method string) error {
	if p == nil {
		return nil
	}
	want := p(method)
	if len(want) == 0 {
		return nil
	}
	got, ok := bearerToken(ctx)
	if !ok {
		reject(ctx, log, method, "missing bearer token")
		return status.Error(codes.Unauthenticated, missingTokenMsg)
	}
	match := 0
	for _, w := range want {
		// Every candidate is compared, so the time taken does not say which one matched.
		match |= subtle.ConstantTimeCompare([]byte(got), []byte(w))
	}
	if match != 1 {
		reject(ctx, log, method, "wrong token")
		return status.Errorf(codes.Unauthenticated, wrongTokenMsg, method)
	}
	return nil
}

// bearerToken returns the token of the incoming call's authorization metadata.
func bearerToken(ctx context.Context) (string, bool) {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return "", false
	}
	for _, v := range md.Get(MetadataKey) {
		if len(v) > len(bearerPrefix) && strings.EqualFold(v[:len(bearerPrefix)], bearerPrefix) {
			return strings.TrimSpace(v[len(bearerPrefix):]), true
		}
	}
	return "", false
}

func reject(ctx context.Context, log zerolog.Logger, method, why string) {
	addr := "unknown"
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		addr = p.Addr.String()
	}
	log.Warn().Str("method", method).Str("peer", addr).Msg("rejected call: " + why)
}

// UnaryServerInterceptor rejects unary calls that lack a token p accepts for their method,
// with codes.Unauthenticated, logging each rejection (method and peer address) at warn.
func UnaryServerInterceptor(p Policy, log zerolog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := check(ctx, p, log, info.FullMethod); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// StreamServerInterceptor is UnaryServerInterceptor for streaming calls.
func StreamServerInterceptor(p Policy, log zerolog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if err := check(ss.Context(), p, log, info.FullMethod); err != nil {
			return err
		}
		return handler(srv, ss)
	}
}

// ReadTokenFile returns the token in the file at path, without surrounding whitespace. An
// empty (or blank) file is an error naming it.
func ReadTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("read token: %s is empty: write the token into it", path)
	}
	return tok, nil
}
