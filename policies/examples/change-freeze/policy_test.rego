package rollplan.examples.change_freeze_test

import data.rollplan.strategy

# at: the facts of a managed workload with a rollout pending, at time now.
at(now) := {
	"now": now,
	"workload": {
		"kind": "StatefulSet",
		"managed": true,
		"podUpdatePolicy": "Recreate",
		"currentRevision": "web-6545fdd768",
		"updateRevision": "web-59c59f4f75",
	},
	"pods": [],
}

# Friday 15:59:59 in Berlin, just before the weekend window
test_friday_15_59_59_in_berlin_just_before_the_weekend_window if {
	strategy.halt == [] with input as at("2026-02-27T14:59:59Z")
	strategy.deny == [] with input as at("2026-02-27T14:59:59Z")
}

# Friday 16:00 in Berlin, the weekend window opens
test_friday_16_00_in_berlin_the_weekend_window_opens if {
	strategy.halt == ["change freeze \"weekend\" until 2026-03-02T08:00:00+01:00 (Europe/Berlin)"] with input as at("2026-02-27T15:00:00Z")
	strategy.deny == ["change freeze \"weekend\" until 2026-03-02T08:00:00+01:00 (Europe/Berlin): template changes of managed workloads wait until it ends (web-6545fdd768 → web-59c59f4f75)"] with input as at("2026-02-27T15:00:00Z")
}

# Friday 23:30 UTC is Saturday 00:30 in Berlin, across midnight
test_friday_23_30_utc_is_saturday_00_30_in_berlin_across_midnight if {
	strategy.halt == ["change freeze \"weekend\" until 2026-03-02T08:00:00+01:00 (Europe/Berlin)"] with input as at("2026-02-27T23:30:00Z")
	strategy.deny == ["change freeze \"weekend\" until 2026-03-02T08:00:00+01:00 (Europe/Berlin): template changes of managed workloads wait until it ends (web-6545fdd768 → web-59c59f4f75)"] with input as at("2026-02-27T23:30:00Z")
}

# Sunday, across the week wrap (Saturday to Sunday)
test_sunday_across_the_week_wrap_saturday_to_sunday if {
	strategy.halt == ["change freeze \"weekend\" until 2026-03-02T08:00:00+01:00 (Europe/Berlin)"] with input as at("2026-03-01T12:00:00Z")
	strategy.deny == ["change freeze \"weekend\" until 2026-03-02T08:00:00+01:00 (Europe/Berlin): template changes of managed workloads wait until it ends (web-6545fdd768 → web-59c59f4f75)"] with input as at("2026-03-01T12:00:00Z")
}

# Monday 07:59:59 in Berlin, the last second of the window
test_monday_07_59_59_in_berlin_the_last_second_of_the_window if {
	strategy.halt == ["change freeze \"weekend\" until 2026-03-02T08:00:00+01:00 (Europe/Berlin)"] with input as at("2026-03-02T06:59:59Z")
	strategy.deny == ["change freeze \"weekend\" until 2026-03-02T08:00:00+01:00 (Europe/Berlin): template changes of managed workloads wait until it ends (web-6545fdd768 → web-59c59f4f75)"] with input as at("2026-03-02T06:59:59Z")
}

# Monday 08:00 in Berlin, the window has closed
test_monday_08_00_in_berlin_the_window_has_closed if {
	strategy.halt == [] with input as at("2026-03-02T07:00:00Z")
	strategy.deny == [] with input as at("2026-03-02T07:00:00Z")
}

# the weekend of the spring DST change ends at 08:00 CEST
test_the_weekend_of_the_spring_dst_change_ends_at_08_00_cest if {
	strategy.halt == ["change freeze \"weekend\" until 2026-03-30T08:00:00+02:00 (Europe/Berlin)"] with input as at("2026-03-27T19:00:00Z")
	strategy.deny == ["change freeze \"weekend\" until 2026-03-30T08:00:00+02:00 (Europe/Berlin): template changes of managed workloads wait until it ends (web-6545fdd768 → web-59c59f4f75)"] with input as at("2026-03-27T19:00:00Z")
}

# DST change day itself (Sunday 29 March)
test_dst_change_day_itself_sunday_29_march if {
	strategy.halt == ["change freeze \"weekend\" until 2026-03-30T08:00:00+02:00 (Europe/Berlin)"] with input as at("2026-03-29T01:30:00Z")
	strategy.deny == ["change freeze \"weekend\" until 2026-03-30T08:00:00+02:00 (Europe/Berlin): template changes of managed workloads wait until it ends (web-6545fdd768 → web-59c59f4f75)"] with input as at("2026-03-29T01:30:00Z")
}

# Monday 07:59:59 CEST after the DST change
test_monday_07_59_59_cest_after_the_dst_change if {
	strategy.halt == ["change freeze \"weekend\" until 2026-03-30T08:00:00+02:00 (Europe/Berlin)"] with input as at("2026-03-30T05:59:59Z")
	strategy.deny == ["change freeze \"weekend\" until 2026-03-30T08:00:00+02:00 (Europe/Berlin): template changes of managed workloads wait until it ends (web-6545fdd768 → web-59c59f4f75)"] with input as at("2026-03-30T05:59:59Z")
}

# Monday 08:00 CEST after the DST change, the window has closed
test_monday_08_00_cest_after_the_dst_change_the_window_has_closed if {
	strategy.halt == [] with input as at("2026-03-30T06:00:00Z")
	strategy.deny == [] with input as at("2026-03-30T06:00:00Z")
}

# the weekend of the autumn DST change ends at 08:00 CET
test_the_weekend_of_the_autumn_dst_change_ends_at_08_00_cet if {
	strategy.halt == ["change freeze \"weekend\" until 2026-10-26T08:00:00+01:00 (Europe/Berlin)"] with input as at("2026-10-23T14:00:00Z")
	strategy.deny == ["change freeze \"weekend\" until 2026-10-26T08:00:00+01:00 (Europe/Berlin): template changes of managed workloads wait until it ends (web-6545fdd768 → web-59c59f4f75)"] with input as at("2026-10-23T14:00:00Z")
}

# a weekday inside the dated year-end freeze
test_a_weekday_inside_the_dated_year_end_freeze if {
	strategy.halt == ["change freeze \"year-end\" until 2027-01-04T08:00:00+01:00"] with input as at("2026-12-22T12:00:00Z")
	strategy.deny == ["change freeze \"year-end\" until 2027-01-04T08:00:00+01:00: template changes of managed workloads wait until it ends (web-6545fdd768 → web-59c59f4f75)"] with input as at("2026-12-22T12:00:00Z")
}

# overlapping windows: the year-end freeze outlasts the weekend
test_overlapping_windows_the_year_end_freeze_outlasts_the_weekend if {
	strategy.halt == ["change freeze \"year-end\" until 2027-01-04T08:00:00+01:00"] with input as at("2026-12-19T12:00:00Z")
	strategy.deny == ["change freeze \"year-end\" until 2027-01-04T08:00:00+01:00: template changes of managed workloads wait until it ends (web-6545fdd768 → web-59c59f4f75)"] with input as at("2026-12-19T12:00:00Z")
}

# overlapping windows ending together: the first declared (weekly) is named
test_overlapping_windows_ending_together_the_first_declared_weekly_is_named if {
	strategy.halt == ["change freeze \"weekend\" until 2027-01-04T08:00:00+01:00 (Europe/Berlin)"] with input as at("2027-01-02T12:00:00Z")
	strategy.deny == ["change freeze \"weekend\" until 2027-01-04T08:00:00+01:00 (Europe/Berlin): template changes of managed workloads wait until it ends (web-6545fdd768 → web-59c59f4f75)"] with input as at("2027-01-02T12:00:00Z")
}

# the last second of the year-end freeze
test_the_last_second_of_the_year_end_freeze if {
	strategy.halt == ["change freeze \"weekend\" until 2027-01-04T08:00:00+01:00 (Europe/Berlin)"] with input as at("2027-01-04T06:59:59Z")
	strategy.deny == ["change freeze \"weekend\" until 2027-01-04T08:00:00+01:00 (Europe/Berlin): template changes of managed workloads wait until it ends (web-6545fdd768 → web-59c59f4f75)"] with input as at("2027-01-04T06:59:59Z")
}

# a Thursday before the year-end freeze
test_a_thursday_before_the_year_end_freeze if {
	strategy.halt == [] with input as at("2026-12-17T12:00:00Z")
	strategy.deny == [] with input as at("2026-12-17T12:00:00Z")
}

# An unmanaged workload is halted (the plan says its controller does not
# honour halts) but its spec is not denied.
test_unmanaged_halted_not_denied if {
	inp := object.union(at("2026-03-01T12:00:00Z"), {"workload": {"managed": false}})
	strategy.halt == ["change freeze \"weekend\" until 2026-03-02T08:00:00+01:00 (Europe/Berlin)"] with input as inp
	strategy.deny == [] with input as inp
}

# A managed workload with no rollout pending (its update revision is its
# current one) is not denied: an update that keeps the template is fine.
test_managed_without_pending_rollout_not_denied if {
	inp := object.union(at("2026-03-01T12:00:00Z"), {"workload": {"updateRevision": "web-6545fdd768"}})
	strategy.halt == ["change freeze \"weekend\" until 2026-03-02T08:00:00+01:00 (Europe/Berlin)"] with input as inp
	strategy.deny == [] with input as inp
}

# Offsets in now are read as instants: 16:00+01:00 is the window's start.
test_now_with_an_offset if {
	strategy.halt == ["change freeze \"weekend\" until 2026-03-02T08:00:00+01:00 (Europe/Berlin)"] with input as at("2026-02-27T16:00:00+01:00")
}

# A window within one day (no wrap), in a zone west of UTC: from 09:00 to
# 17:00 on Wednesdays in New York (2026-03-04 is a Wednesday, EST).
train := [{"name": "release-train", "zone": "America/New_York", "from": "Wed 09:00", "to": "Wed 17:00"}]

test_window_within_a_day if {
	strategy.halt == [] with input as at("2026-03-04T13:59:59Z") with strategy.weekly as train with strategy.dated as []
	strategy.halt == ["change freeze \"release-train\" until 2026-03-04T17:00:00-05:00 (America/New_York)"] with input as at("2026-03-04T14:00:00Z") with strategy.weekly as train with strategy.dated as []
	strategy.halt == ["change freeze \"release-train\" until 2026-03-04T17:00:00-05:00 (America/New_York)"] with input as at("2026-03-04T21:59:59Z") with strategy.weekly as train with strategy.dated as []
	strategy.halt == [] with input as at("2026-03-04T22:00:00Z") with strategy.weekly as train with strategy.dated as []
}
