#!/usr/bin/env bash
# pr-plan.sh: plan a pull request's workload manifests against a snapshot
# of the cluster and post the plan as a pull-request comment.
#
#   deploy/ci/pr-plan.sh SNAPSHOT CHANGE [rollplan plan flags...]
#
# SNAPSHOT is a `rollplan snapshot` capture (committed, or captured by the
# job); CHANGE the manifests the pull request proposes (a file or folder).
# The comment is the plan as Markdown (`rollplan plan --change -o
# markdown`). The script exits as `rollplan plan` does, so the check fails
# when the change would be denied or halt (3), stall (4), or cannot be
# planned (1); the comment is posted in every case.
#
# Environment:
#   ROLLPLAN  the rollplan binary (default: rollplan on PATH)
#   POST      the command that posts the comment, reading it on stdin
#             (default: gh pr comment "$PR" --body-file -)
#   PR        the pull request's number, for the default POST
set -u -o pipefail

if [ $# -lt 2 ]; then
	echo "usage: $0 SNAPSHOT CHANGE [rollplan plan flags...]" >&2
	exit 2
fi
snapshot=$1 change=$2
shift 2
rollplan=${ROLLPLAN:-rollplan}
post=${POST:-gh pr comment "${PR:?set PR to the pull request number, or POST to another command}" --body-file -}

body=$(mktemp)
errors=$(mktemp)
trap 'rm -f "$body" "$errors"' EXIT

"$rollplan" plan -f "$snapshot" --change "$change" -o markdown "$@" >"$body" 2>"$errors"
status=$?
if [ "$status" -eq 1 ] || [ "$status" -eq 2 ]; then
	# No plan to show: say why instead.
	{
		echo "### rollplan could not plan this change"
		echo
		echo '```'
		cat "$errors"
		echo '```'
	} >"$body"
fi
cat "$errors" >&2
$post <"$body" || { echo "pr-plan.sh: posting the comment failed ($post)" >&2; exit 1; }
exit "$status"
