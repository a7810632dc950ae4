package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"pacer/scheduler"
)

// TestManualActionRules pins which operations allow each manual action
// (design §2), and that Allow refuses exactly those with a TransitionError
// saying the rule and the state once.
func TestManualActionRules(t *testing.T) {
	type can struct{ release, resolve, cancel bool }
	cases := []struct {
		op   scheduler.Operation
		want can
	}{
		{scheduler.Operation{State: scheduler.StateScheduled}, can{cancel: true}},
		{scheduler.Operation{State: scheduler.StateWaitingForBudget}, can{cancel: true}},
		{scheduler.Operation{State: scheduler.StateRunning}, can{}},
		{scheduler.Operation{State: scheduler.StateHeld, HoldReason: scheduler.HoldUnknownOutcome}, can{release: true, resolve: true, cancel: true}},
		{scheduler.Operation{State: scheduler.StateHeld, HoldReason: scheduler.HoldAuthRevoked}, can{release: true, cancel: true}},
		{scheduler.Operation{State: scheduler.StateSucceeded}, can{}},
		{scheduler.Operation{State: scheduler.StateFailed, FailureReason: scheduler.FailurePermanent}, can{release: true, cancel: true}},
		{scheduler.Operation{State: scheduler.StateCanceled}, can{}},
	}
	for _, tc := range cases {
		op := tc.op
		name := op.DescribeState()
		if got := (can{op.CanRelease(), op.CanResolve(), op.CanCancel()}); got != tc.want {
			t.Errorf("%s: can %+v, want %+v", name, got, tc.want)
		}
		for action, allowed := range map[scheduler.ManualAction]bool{
			scheduler.ActRelease: tc.want.release, scheduler.ActResolve: tc.want.resolve, scheduler.ActCancel: tc.want.cancel,
		} {
			err := op.Allow(action)
			if allowed {
				if err != nil {
					t.Errorf("%s %s: %v, want allowed", action, name, err)
				}
				continue
			}
			var te *scheduler.TransitionError
			if !errors.As(err, &te) || !errors.Is(err, scheduler.ErrInvalidTransition) || te.From != op.State || te.Action != action {
				t.Errorf("%s %s: %v, want a TransitionError", action, name, err)
				continue
			}
			if msg := err.Error(); !strings.HasSuffix(msg, "; this one is "+name) && !strings.Contains(msg, "; this one is "+name+": ") {
				t.Errorf("%s %s: %q does not end with the state", action, name, msg)
			}
		}
	}
	// Wrapped by a store, it is still found and still reads once.
	err := fmt.Errorf("release op-1: %w", scheduler.Operation{State: scheduler.StateScheduled}.Allow(scheduler.ActRelease))
	var te *scheduler.TransitionError
	if !errors.As(err, &te) || te.From != scheduler.StateScheduled || !errors.Is(err, scheduler.ErrInvalidTransition) {
		t.Fatalf("wrapped: %v", err)
	}
}

// TestServiceErrorsReadOnce: the service returns the store's errors as
// they are, so a refused action names its action and operation once, and
// its TransitionError is found through the wrapping.
func TestServiceErrorsReadOnce(t *testing.T) {
	ctx := context.Background()
	h := setup(t, scheduler.EngineConfig{})
	h.scope("acct", "https://provider.example", "", 1)
	h.enqueue(scheduler.OperationInput{ID: "op-1", Scope: "acct", Method: "POST", Path: "/x"})
	for _, tt := range []struct {
		call func() error
		want string
		act  scheduler.ManualAction
	}{
		{func() error { _, err := h.svc.Release(ctx, "op-1", nil, "again", "carol"); return err },
			"release op-1: only held or failed operations, and released ones not sent yet, can be released; this one is scheduled", scheduler.ActRelease},
		{func() error {
			_, err := h.svc.Resolve(ctx, "op-1", scheduler.ResolvedApplied, "checked", "carol")
			return err
		},
			"resolve op-1: only operations held for unknownOutcome can be resolved; this one is scheduled", scheduler.ActResolve},
		{func() error {
			_, err := h.svc.Resolve(ctx, "op-1", scheduler.ResolvedResend, "not applied", "carol")
			return err
		},
			"resolve op-1: only operations held for unknownOutcome can be resolved; this one is scheduled", scheduler.ActResolve},
	} {
		err := tt.call()
		var te *scheduler.TransitionError
		if !errors.As(err, &te) || te.Action != tt.act || te.From != scheduler.StateScheduled {
			t.Fatalf("%v: want a TransitionError of %s", err, tt.act)
		}
		if err.Error() != tt.want {
			t.Fatalf("error reads %q, want %q", err, tt.want)
		}
	}
	if _, err := h.svc.Cancel(ctx, "op-1", "stop", "carol"); err != nil {
		t.Fatal(err)
	}
	_, err := h.svc.Cancel(ctx, "op-1", "again", "carol")
	if want := "cancel op-1: only scheduled, waitingForBudget, held or failed operations can be canceled; this one is canceled"; err == nil || err.Error() != want {
		t.Fatalf("cancel twice: %v, want %q", err, want)
	}
	_, err = h.svc.ResumeScope(ctx, "nope", "why", "carol")
	if want := "resume scope nope: not found"; err == nil || err.Error() != want {
		t.Fatalf("resume unknown scope: %v, want %q", err, want)
	}
}

// TestValidationOnePass: one call names every field at fault, those the
// caller could not read (Invalid) with those the service finds, with the
// item's prefix in a batch.
func TestValidationOnePass(t *testing.T) {
	ctx := context.Background()
	h := setup(t, scheduler.EngineConfig{})
	h.scope("acct", "https://provider.example", "", 1)
	good := scheduler.OperationInput{ID: "ok-1", Scope: "acct", Method: "GET", Path: "/x"}
	bad := scheduler.OperationInput{
		ID: "bad-1", Scope: "acct", Method: "FETCH", Path: "no-slash",
		Invalid: []scheduler.FieldError{{Field: "notBefore", Message: "must be an RFC 3339 time"}},
	}
	prefix := func(i int) string { return fmt.Sprintf("operations[%d].", i) }
	_, err := h.svc.Enqueue(ctx, []scheduler.OperationInput{good, bad, good, bad}, prefix)
	var ve *scheduler.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("enqueue: %v, want a ValidationError", err)
	}
	var got []string
	for _, f := range ve.Fields {
		got = append(got, f.Field)
	}
	want := "[operations[1].notBefore operations[1].request.method operations[1].request.path operations[3].notBefore operations[3].request.method operations[3].request.path]"
	if fmt.Sprint(got) != want {
		t.Fatalf("fields %v, want %s", got, want)
	}
	if page, err := h.svc.ListOperations(ctx, scheduler.OperationFilter{}); err != nil || len(page.Operations) != 0 {
		t.Fatalf("stored %d operations of a refused batch (%v)", len(page.Operations), err)
	}
	if _, err := h.svc.Enqueue(ctx, nil, prefix); !errors.As(err, &ve) || ve.Fields[0].Field != "operations" || !strings.Contains(ve.Fields[0].Message, "(got 0)") {
		t.Fatalf("empty batch: %v", err)
	}

	// A scope: what did not parse, and what the service finds, at once;
	// the field that did not parse is not judged again.
	_, _, err = h.svc.PutScope(ctx, scheduler.ScopeInput{
		Name: "acct-2", Provider: "generic", BaseURL: "ftp://x",
		RateLimit: &scheduler.RateLimit{Requests: 10},
		Invalid:   []scheduler.FieldError{{Field: "rateLimit.per", Message: "must be a duration"}},
	}, "carol")
	got = nil
	if !errors.As(err, &ve) {
		t.Fatalf("put scope: %v, want a ValidationError", err)
	}
	for _, f := range ve.Fields {
		got = append(got, f.Field)
	}
	if fmt.Sprint(got) != "[rateLimit.per baseURL]" {
		t.Fatalf("scope fields %v, want [rateLimit.per baseURL]", got)
	}

	// A manual action: its reason and its other input at once.
	far := h.svc.Now().AddDate(100, 0, 0)
	names := func(err error) string {
		t.Helper()
		var ve *scheduler.ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("%v, want a ValidationError", err)
		}
		var fs []string
		for _, f := range ve.Fields {
			fs = append(fs, f.Field)
		}
		return fmt.Sprint(fs)
	}
	if _, err := h.svc.Release(ctx, "ok-1", &far, " ", "carol"); names(err) != "[reason at]" {
		t.Fatalf("release fields %s, want [reason at]", names(err))
	}
	if _, err := h.svc.ReplaceCredentials(ctx, "acct", scheduler.Credentials{Type: "magic"}, "", "carol"); names(err) != "[reason credentials.type]" {
		t.Fatalf("replace credentials fields %s, want [reason credentials.type]", names(err))
	}
}
