package main

import (
	"github.com/spf13/cobra"

	"github.com/rollplan/rollplan/planner/plan"
)

func newSchemaCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of the plan (rollplan plan -o json)",
		Long: `Print the JSON Schema (draft 2020-12) of the Plan document that
rollplan plan -o json|yaml prints: every field, its type, whether it is
required (fields that are never omitted), and its description.`,
		Example: `  rollplan schema > plan.schema.json`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write(plan.Schema)
			return err
		},
	}
}
