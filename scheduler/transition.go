package scheduler

import (
	"fmt"
	"slices"
	"strings"
)

// ManualAction names what a person may do to an operation. Which states
// allow each is decided here and nowhere else: the Store checks it with
// Operation.Allow, and the page, the API and the CLI ask the operation
// (CanRelease, CanResolve, CanCancel) or read the *TransitionError.
type ManualAction string

// The manual actions on an operation.
const (
	// ActRelease runs a held or failed operation again.
	ActRelease ManualAction = "release"
	// ActResolve records what a person found at the provider for a
	// mutation held for unknownOutcome.
	ActResolve ManualAction = "resolve"
	// ActCancel ends an operation that is not running or finished.
	ActCancel ManualAction = "cancel"
	// ActUnrelease undoes a release not sent yet: the operation goes back
	// to what it was released from (design §14).
	ActUnrelease ManualAction = "unrelease"
)

// Done is the action's past participle, for saying what it did:
// "released", "canceled".
func (a ManualAction) Done() string {
	switch a {
	case ActRelease:
		return "released"
	case ActResolve:
		return "resolved"
	case ActCancel:
		return "canceled"
	case ActUnrelease:
		return "unreleased"
	}
	return string(a)
}

// releasable and cancelable are the states that allow a release and a
// cancel, in life-cycle order. A running operation cannot be canceled:
// its request is already on its way.
var (
	releasable = []State{StateHeld, StateFailed}
	cancelable = []State{StateScheduled, StateWaitingForBudget, StateHeld, StateFailed}
)

// CanRelease reports whether a person may release an operation in s.
func (s State) CanRelease() bool { return slices.Contains(releasable, s) }

// CanCancel reports whether a person may cancel an operation in s. A running
// operation cannot be canceled: its request is already on its way.
func (s State) CanCancel() bool { return slices.Contains(cancelable, s) }

// CanRelease reports whether a person may release o (ActRelease): a held
// or failed operation, or one whose release has not been sent yet (the
// release is then changed to the new time).
func (o Operation) CanRelease() bool { return o.State.CanRelease() || o.CanUnrelease() }

// CanUnrelease reports whether a person may undo o's release
// (ActUnrelease): it waits to be sent after a release and has not been.
func (o Operation) CanUnrelease() bool { return o.State.Due() && o.ReleasedFrom != nil }

// CanResolve reports whether a person may resolve o (ActResolve): only a
// mutation held for unknownOutcome has an outcome to settle.
func (o Operation) CanResolve() bool {
	return o.State == StateHeld && o.HoldReason == HoldUnknownOutcome
}

// CanCancel reports whether a person may cancel o (ActCancel).
func (o Operation) CanCancel() bool { return o.State.CanCancel() }

// Allow returns nil when o's state allows a, else the *TransitionError
// saying why not.
func (o Operation) Allow(a ManualAction) error {
	var ok bool
	switch a {
	case ActRelease:
		ok = o.CanRelease()
	case ActResolve:
		ok = o.CanResolve()
	case ActCancel:
		ok = o.CanCancel()
	case ActUnrelease:
		ok = o.CanUnrelease()
	}
	if ok {
		return nil
	}
	return &TransitionError{From: o.State, Reason: o.reason(), Action: a}
}

// reason is o's hold or failure reason; "" for neither.
func (o Operation) reason() string {
	if o.HoldReason != "" {
		return string(o.HoldReason)
	}
	return string(o.FailureReason)
}

// DescribeState names o's state with its hold or failure reason:
// "held (unknownOutcome)", "failed (permanent)", "scheduled".
func (o Operation) DescribeState() string { return describeState(o.State, o.reason()) }

// describeState is DescribeState for a state and its reason.
func describeState(s State, reason string) string {
	if reason == "" {
		return string(s)
	}
	return fmt.Sprintf("%s (%s)", s, reason)
}

// TransitionError says that an operation's state does not allow a manual
// action. errors.Is matches it with ErrInvalidTransition; errors.As finds
// it through any wrapping. Its Error is the whole sentence shown to people
// (page, API detail, CLI): callers show it as it is.
type TransitionError struct {
	// From is the operation's state when the action was refused.
	From State
	// Reason is its hold or failure reason; empty for none.
	Reason string
	// Action is what was refused.
	Action ManualAction
}

// Error says which operations allow the action and what this one is:
// "only held or failed operations, and released ones not sent yet, can be released; this one is scheduled".
func (e *TransitionError) Error() string {
	var rule string
	switch e.Action {
	case ActRelease:
		rule = "only " + orList(releasable) + " operations, and released ones not sent yet, can be released"
	case ActUnrelease:
		rule = "only a release not sent yet can be undone"
	case ActResolve:
		rule = "only operations held for " + string(HoldUnknownOutcome) + " can be resolved"
	case ActCancel:
		rule = "only " + orList(cancelable) + " operations can be canceled"
	default:
		rule = fmt.Sprintf("no operation can be %s", e.Action)
	}
	msg := rule + "; this one is " + describeState(e.From, e.Reason)
	if e.Action == ActCancel && e.From == StateRunning {
		msg += ": its request is already on its way"
	}
	return msg
}

// Is reports whether target is ErrInvalidTransition.
func (e *TransitionError) Is(target error) bool { return target == ErrInvalidTransition }

// orList writes states as "a, b or c".
func orList(states []State) string {
	words := make([]string, len(states))
	for i, s := range states {
		words[i] = string(s)
	}
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}
