package stored

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	"pacer/scheduler"
)

// Page size bounds of Store.ListOperations.
const (
	DefaultPageSize = 50
	MaxPageSize     = 1000
)

// PageLimit is the page size a listing asked for limit returns: limit
// within 1..MaxPageSize, DefaultPageSize for 0 or less.
func PageLimit(limit int) int {
	switch {
	case limit <= 0:
		return DefaultPageSize
	case limit > MaxPageSize:
		return MaxPageSize
	}
	return limit
}

// cursorPrefix versions the cursor format.
const cursorPrefix = "v1:"

// EncodeCursor makes the opaque cursor of the page after the row
// (createdAt, rowID) of a listing newest first.
func EncodeCursor(createdAt, rowID int64) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%s%d:%d", cursorPrefix, createdAt, rowID))
}

// DecodeCursor reads a cursor made by EncodeCursor; any other value is a
// *scheduler.ValidationError naming the field "cursor".
func DecodeCursor(c string) (createdAt, rowID int64, err error) {
	invalid := &scheduler.ValidationError{Fields: []scheduler.FieldError{{Field: "cursor", Message: "is not a cursor from a previous page; start again without one"}}}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, 0, invalid
	}
	s, ok := strings.CutPrefix(string(b), cursorPrefix)
	if !ok {
		return 0, 0, invalid
	}
	if n, err := fmt.Sscanf(s, "%d:%d", &createdAt, &rowID); err != nil || n != 2 || EncodeCursor(createdAt, rowID) != c {
		return 0, 0, invalid
	}
	return createdAt, rowID, nil
}

// StatesTerm is the SQL condition, on operations o, selecting the
// operations that report one of states, given opState, the store's
// expression of the state an operation reports. A stored state reads as
// itself, except that a scheduled row held back by its scope reads
// waitingForBudget: the stored states are filtered first (by index), and
// opState only where scheduled and waitingForBudget are not asked for
// together. Held or failed together are exactly the rows with a reason
// (both stores' CHECKs). The states must be valid (State.Valid): they are
// written as literals.
func StatesTerm(states []scheduler.State, opState string) string {
	want := func(st scheduler.State) bool { return slices.Contains(states, st) }
	if len(states) == 2 && want(scheduler.StateHeld) && want(scheduler.StateFailed) {
		return "coalesce(o.hold_reason, o.failure_reason) IS NOT NULL"
	}
	var stored, reported []string
	for _, st := range scheduler.AllStates {
		if want(st) || (st == scheduler.StateScheduled && want(scheduler.StateWaitingForBudget)) {
			stored = append(stored, "'"+string(st)+"'")
		}
		if want(st) {
			reported = append(reported, "'"+string(st)+"'")
		}
	}
	term := "o.state IN (" + strings.Join(stored, ", ") + ")"
	if want(scheduler.StateScheduled) != want(scheduler.StateWaitingForBudget) {
		term += " AND " + opState + " IN (" + strings.Join(reported, ", ") + ")"
	}
	return term
}
