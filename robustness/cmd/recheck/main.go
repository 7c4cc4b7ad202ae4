// Command recheck runs the robustness checkers again on the history of an
// earlier run, as a failure writes it (history.json): after a checker is
// fixed, the histories that made it fail show whether the fix explains
// them.
//
//	go run ./robustness/cmd/recheck [-watchdog 2s] <dir>/history.json ...
//
// -watchdog is the run's WatchdogTimeout (the suite's default unless the
// run set another). The hygiene check reads the live server, so it is not
// rerun. The exit code is 1 when any history has a violation, 2 on bad
// input.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/lockgen/lockgen/robustness"
)

func main() {
	wd := flag.Duration("watchdog", 2*time.Second, "the run's WatchdogTimeout")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: recheck [-watchdog 2s] history.json ...")
		os.Exit(2)
	}
	code := 0
	for _, path := range flag.Args() {
		h, err := robustness.ReadHistory(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "recheck: %v\n", err)
			os.Exit(2)
		}
		dir, err := os.MkdirTemp("", "recheck-")
		if err != nil {
			fmt.Fprintf(os.Stderr, "recheck: %v\n", err)
			os.Exit(2)
		}
		fmt.Println(path)
		bad := false
		for _, r := range robustness.CheckAll(h, robustness.RunLimits(*wd), dir) {
			fmt.Printf("  %-16s checked %d, violations %d\n", r.Check, r.Checked, len(r.Violations))
			for _, v := range r.Violations {
				fmt.Printf("    %s\n", v.Msg)
				code, bad = 1, true
			}
		}
		if !bad {
			_ = os.RemoveAll(dir) // kept with a violation: its visualizations are there
		}
	}
	os.Exit(code)
}
