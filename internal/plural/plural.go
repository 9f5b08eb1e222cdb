// Package plural words a count with its noun, so that output never says
// "1 waves": rollplan's commands, renderers and notes share it.
package plural

import "strconv"

// Count is n and its noun: "1 wave", "0 waves", "2 waves".
func Count(n int, one, many string) string {
	return strconv.Itoa(n) + " " + Noun(n, one, many)
}

// Noun is one when n is 1 and many otherwise, for text that writes the
// count apart ("1 of 1 pod", "3/3 pods").
func Noun(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
