package httpapi

import (
	"time"

	"pacer/scheduler"
)

// Change is one state change of one operation in the feed of
// GET /v1/changes.
type Change struct {
	// Seq orders the feed: it grows with every change and is never reused.
	Seq           int64  `json:"seq"`
	OperationID   string `json:"operationId"`
	ProviderScope string `json:"providerScope"`
	// State is the state the operation entered.
	State string     `json:"state"`
	At    *time.Time `json:"at"`
}

// ChangeList is the body of GET /v1/changes: the changes after the
// query's "after", oldest first, and Next, the "after" of the following
// query (scheduler.ChangePage.Next: the last change examined, which for a
// query of one scope may lie past the last change returned).
type ChangeList struct {
	Changes []Change `json:"changes"`
	Next    int64    `json:"next"`
}

// newChangeList converts a page of the change feed for a response.
func newChangeList(p scheduler.ChangePage) ChangeList {
	out := ChangeList{Changes: make([]Change, len(p.Changes)), Next: p.Next}
	for i, c := range p.Changes {
		out.Changes[i] = Change{
			Seq: c.Seq, OperationID: c.OperationID, ProviderScope: c.Scope,
			State: string(c.State), At: optTime(c.At),
		}
	}
	return out
}
