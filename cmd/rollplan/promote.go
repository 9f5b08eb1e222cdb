package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rollplan/rollplan/executor"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
)

// newPromoteCommand is rollplan promote (abort false) or rollplan abort: both
// write the workload's analysis state (executor.AnalysisState), which the
// driver of the rollout (the controller or a running apply) acts on at
// its next step, as it honours rollplan pause.
func newPromoteCommand(abort bool) *cobra.Command {
	var config kubeFlags
	use, short := "promote", "Skip the analysis gate a rollout waits at: the next wave starts"
	long := `Skip the analysis gate (soak, measurements, verdict) the rollout of a
Deployment, StatefulSet or DaemonSet waits at, or an inconclusive
verdict it would measure again: the driver (the rollplan controller, or a
running rollplan apply) starts the next wave at its next step. Later waves
wait for their own gates as before. The record is the workload's
annotation ` + facts.AnnAnalysis + `; rollplan status shows it.`
	if abort {
		use, short = "abort", "Halt a gated rollout and roll it back to the revision it came from"
		long = `Halt the rollout of a Deployment, StatefulSet or DaemonSet that waits at
analysis gates and roll it back, as a failed analysis with onFail
rollback does: the driver (the rollplan controller, or a running rollplan
apply) sets the template back to the revision the rollout came from at
its next step and returns the updated pods to it, in place where the
policy allows, under the same budgets. For a rollout without gates use
rollplan undo.`
	}
	cmd := &cobra.Command{
		Use:     use + " KIND/NAME [-n NAMESPACE]",
		Short:   short,
		Long:    long,
		Example: fmt.Sprintf("  rollplan %s sts/web -n prod", use),
		Args:    oneWorkload,
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, t, err := connectTarget(&config, args[0])
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			st, err := executor.ReadAnalysisState(ctx, cl.client, t)
			if err != nil {
				return err
			}
			switch {
			case st == nil:
				return fmt.Errorf("%s: no analysis gate is recorded (annotation %s): the rollout waits for none%s", t, facts.AnnAnalysis, undoHint(abort, &config, t))
			case st.RolledBack:
				return fmt.Errorf("%s: already rolled back to %s after wave %d: %s", t, st.Revision, st.Wave, st.Message)
			case !abort && (st.Promoted || st.Verdict == "pass"):
				return fmt.Errorf("%s: the gate after wave %d is already open (%s): nothing to promote", t, st.Wave, st.Summary())
			}
			was := st.Summary()
			if abort {
				st.Aborted = true
			} else {
				st.Promoted, st.Message = true, "promoted by hand (rollplan promote)"
			}
			if err := executor.WriteAnalysisState(ctx, cl.client.AppsV1(), t.Kind, t.Namespace, t.Name, st); err != nil {
				return err
			}
			who, err := carriesOn(ctx, cl.client, &config, t)
			if err != nil {
				who = "the driver carries on: " + err.Error()
			}
			if abort {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: abort recorded (was: %s); it rolls back to %s: %s\n", t, was, st.From, who)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: the gate after wave %d is skipped (was: %s): %s\n", t, st.Wave, was, who)
			}
			return nil
		},
	}
	config.register(cmd.Flags())
	cmd.ValidArgsFunction = completeWorkloads(&config, false)
	return cmd
}

func undoHint(abort bool, config *kubeFlags, t live.Target) string {
	if !abort {
		return ""
	}
	return "; to roll it back anyway: `" + commandFor(config, "rollplan undo", t) + "`"
}
