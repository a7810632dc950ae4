package main

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// runLoopback measures the HTTP calls alone: the same workers and requests
// as the other systems, with no database, as a reference for the ceiling.
func runLoopback(a childArgs) (result, error) {
	var r result
	client := newHTTPClient(a.Workers)
	var next, errs atomic.Int64
	var wg sync.WaitGroup
	m := startMeter()
	for range a.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(a.N) {
				if err := sendOne(client, a.Provider, 0); err != nil {
					errs.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	m.stop(&r, a.N)
	r.Note = "HTTP only, no database"
	if e := errs.Load(); e > 0 {
		return r, fmt.Errorf("check loopback: %d send errors", e)
	}
	return r, nil
}
