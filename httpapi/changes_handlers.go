package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"pacer/scheduler"
)

// handleChanges answers GET /v1/changes?after=&limit=&wait=&providerScope=:
// the state changes after "after", oldest first. When there is none it
// long-polls: it answers as soon as one commits, or after "wait" (a
// duration such as "30s", or whole seconds; capped at 60s) with an empty
// list and next = after. A client that went away ends the wait silently;
// a server shutdown ends it with an empty list.
func (s *Server) handleChanges(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var (
		cq   scheduler.ChangeQuery
		errs []FieldError
	)
	cq.Scope = q.Get("providerScope")
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			errs = append(errs, FieldError{Field: "after", Message: "must be 0 or the next of a previous answer"})
		}
		cq.After = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			errs = append(errs, FieldError{Field: "limit", Message: "must be a whole number between 1 and 1000"})
		}
		cq.Limit = n
	}
	if v := q.Get("wait"); v != "" {
		d, ok := parseWait(v)
		if !ok {
			errs = append(errs, FieldError{Field: "wait", Message: `must be a duration such as "30s" (at most 60s are waited)`})
		}
		cq.Wait = d
	}
	if len(errs) > 0 {
		s.writeProblem(w, r, validationProblem(errs))
		return
	}
	page, err := s.svc.Changes(r.Context(), cq)
	if err != nil {
		if r.Context().Err() != nil {
			return // the client went away: no one to answer
		}
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, newChangeList(page))
}

// parseWait reads a long-poll wait: a Go duration ("30s", "1m") or whole
// seconds ("30"); not negative.
func parseWait(v string) (time.Duration, bool) {
	if n, err := strconv.Atoi(v); err == nil {
		return time.Duration(min(n, 86400)) * time.Second, n >= 0
	}
	d, ok := parseDuration(v)
	return d, ok && d >= 0
}
