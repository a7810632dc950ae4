package providers

import (
	"context"
	"errors"
)

// ClassifyTransport classifies an exchange that ended without a response.
// A request that provably never left (dial, DNS or TLS failure before any
// byte was written) is transient for every kind. Once the request may have
// been written, a read is transient and a mutation's outcome is unknown.
func ClassifyTransport(ex Exchange) Outcome {
	o := Outcome{Class: ClassTransient, Reason: "not-sent", Detail: bound(errString(ex.Err))}
	if !ex.Written {
		return o
	}
	o.Reason = "no-response"
	if errors.Is(ex.Err, context.DeadlineExceeded) {
		o.Reason = "timeout"
	}
	if ex.Mutation {
		o.Class = ClassUnknownOutcome
	}
	return o
}

func errString(err error) string {
	if err == nil {
		return "no response"
	}
	return err.Error()
}

// bound cuts s to MaxDetail bytes without splitting a UTF-8 sequence.
func bound(s string) string {
	if len(s) <= MaxDetail {
		return s
	}
	cut := MaxDetail
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut]
}
