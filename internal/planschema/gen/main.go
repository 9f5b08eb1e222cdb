// Command gen writes planner/plan/plan.schema.json (go generate
// ./planner/plan runs it in planner/plan).
package main

import (
	"fmt"
	"os"

	"github.com/rollplan/rollplan/internal/planschema"
)

func main() {
	b, err := planschema.Generate()
	if err == nil {
		err = os.WriteFile("plan.schema.json", b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "generate the plan schema:", err)
		os.Exit(1)
	}
}
