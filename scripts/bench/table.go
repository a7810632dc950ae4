package main

import (
	"fmt"
	"io"
	"runtime"
)

// printTable writes the results and the pacer/River and pacer/ceiling
// ratios as a Markdown table (nothing when no throughput row ran).
func printTable(w io.Writer, rs []result, n, workers int) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(w, "\nN=%d operations per system, %d HTTP workers, GOMAXPROCS=%d\n\n", n, workers, runtime.GOMAXPROCS(0))
	fmt.Fprintln(w, "| system | ops/s | CPU-ms / 1k ops | peak RSS MiB | wall s | note |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | --- |")
	byName := map[string]result{}
	for _, r := range rs {
		if r.Err != "" {
			fmt.Fprintf(w, "| %s | error | | | | %s |\n", r.Name, r.Err)
			continue
		}
		byName[r.Name] = r
		note := r.Note
		if r.ServerCPUMs > 0 {
			note = fmt.Sprintf("PostgreSQL server %.1f CPU-ms / 1k ops; %s", r.ServerCPUMs/float64(r.Ops)*1000, note)
		}
		fmt.Fprintf(w, "| %s | %.0f | %.1f | %.1f | %.2f | %s |\n", r.Name, r.opsPerSec(), r.cpuPer1k(), float64(r.RSSKiB)/1024, r.Seconds, note)
	}
	if e, ok := byName["enqueue-single"]; ok {
		if b, ok := byName["enqueue-single@base"]; ok {
			fmt.Fprintf(w, "\nenqueue-single/base: enqueues/s %.2f×, CPU-ms / 1k %.2f×\n", ratio(e.opsPerSec(), b.opsPerSec()), ratio(e.cpuPer1k(), b.cpuPer1k()))
		}
	}
	header := false
	for _, pr := range [][2]string{{"pacer", "river"}, {"pacer", "ceiling"},
		{"pg-pacer", "pg-river"}, {"pg-pacer", "pg-ceiling"}, {"pg-pacer2", "pg-river"}, {"pg-pacer2", "pg-ceiling"}, {"pg-pacer2", "pg-pacer"}} {
		p, ok1 := byName[pr[0]]
		o, ok2 := byName[pr[1]]
		if !ok1 || !ok2 {
			continue
		}
		if !header {
			fmt.Fprintln(w)
			fmt.Fprintln(w, "| ratio | ops/s | CPU-ms / 1k ops | peak RSS |")
			fmt.Fprintln(w, "| --- | ---: | ---: | ---: |")
			header = true
		}
		fmt.Fprintf(w, "| %s/%s | %.2f× | %.2f× | %.2f× |\n", pr[0], pr[1],
			ratio(p.opsPerSec(), o.opsPerSec()), ratio(p.cpuPer1k(), o.cpuPer1k()), ratio(float64(p.RSSKiB), float64(o.RSSKiB)))
	}
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
