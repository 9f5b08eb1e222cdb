# Example policy "change freeze": no rollout action during a declared
# freeze. While one holds, halt stops every rollout rollplan plans (naming
# the freeze and when it ends), and deny makes the gate refuse template
# changes of managed workloads. Time is the facts' `now` (the snapshot or
# request time), never the wall clock: plans stay reproducible and the
# policy runs compiled. policy.yaml is the CEL twin; keep both in step.
package rollplan.strategy

import data.rollplan.defaults

# ---------------------------------------------------------------------
# EDIT HERE: the freezes (and the same in policy.yaml's params).
#
# weekly: recurring windows, "<Sun..Sat> HH:MM" in the named IANA time
# zone, from (inclusive) to (exclusive); a window may wrap the week.
# dated: one-off freezes, RFC 3339 from (inclusive) to (exclusive).
weekly := [{"name": "weekend", "zone": "Europe/Berlin", "from": "Fri 16:00", "to": "Mon 08:00"}]

dated := [{"name": "year-end", "from": "2026-12-18T16:00:00+01:00", "to": "2027-01-04T08:00:00+01:00"}]

# ---------------------------------------------------------------------

# halt: the default's halts, and the freeze in force (the one ending last).
halt := array.concat(defaults.halt, [freeze.text]) if {
	freeze
} else := defaults.halt

# deny: a managed workload whose update revision differs from its current
# one has a rollout pending (the gate judges the request's spec: a
# template change gives a new update revision).
deny := array.concat(defaults.deny, [msg]) if {
	input.workload.managed
	input.workload.updateRevision != input.workload.currentRevision
	msg := sprintf("%s: template changes of managed workloads wait until it ends (%s → %s)", [
		freeze.text,
		input.workload.currentRevision,
		input.workload.updateRevision,
	])
} else := defaults.deny

now_ns := time.parse_rfc3339_ns(input.now)

# active: every freeze in force, weekly windows first, in declared order.
active := array.concat(
	[e | some w in weekly; e := weekly_entry(w)],
	[e | some d in dated; e := dated_entry(d)],
)

# freeze: the first active freeze that no other outlasts.
freeze := [e |
	some e in active
	not outlasted(e)
][0]

outlasted(e) if {
	some o in active
	o.end > e.end
}

dated_entry(d) := {"end": end, "text": sprintf("change freeze %q until %s", [d.name, d.to])} if {
	time.parse_rfc3339_ns(d.from) <= now_ns
	end := time.parse_rfc3339_ns(d.to)
	now_ns < end
}

day_index := {"Sun": 0, "Mon": 1, "Tue": 2, "Wed": 3, "Thu": 4, "Fri": 5, "Sat": 6}

weekday_index := {"Sunday": 0, "Monday": 1, "Tuesday": 2, "Wednesday": 3, "Thursday": 4, "Friday": 5, "Saturday": 6}

# week_minute("Fri 16:00") = 5*1440 + 16*60.
week_minute(s) := ((day_index[substring(s, 0, 3)] * 1440) + (to_number(substring(s, 4, 2)) * 60)) + to_number(substring(s, 7, 2))

in_window(m, f, t) if {
	f < t
	f <= m
	m < t
}

in_window(m, f, t) if {
	f > t
	m >= f
}

in_window(m, f, t) if {
	f > t
	m < t
}

weekly_entry(w) := {"end": end, "text": text} if {
	[h, mi, s] := time.clock([now_ns, w.zone])
	m := ((weekday_index[time.weekday([now_ns, w.zone])] * 1440) + (h * 60)) + mi
	f := week_minute(w.from)
	t := week_minute(w.to)
	in_window(m, f, t)

	# The end's wall time as if no offset change came in between, then
	# corrected by the difference of the wall clock there (a DST change).
	guess := (now_ns + ((((((t - m) + 10080) % 10080) * 60) - s) * 1000000000)) - (now_ns % 1000000000)
	[gh, gm, _] := time.clock([guess, w.zone])
	diff := ((((t % 1440) - ((gh * 60) + gm)) + 2160) % 1440) - 720
	end := guess + ((diff * 60) * 1000000000)
	text := sprintf("change freeze %q until %s (%s)", [w.name, time.format([end, w.zone, "2006-01-02T15:04:05Z07:00"]), w.zone])
}
