// Package plural words a count with its noun, so that output never says
// "1 waves": rollplan's commands, renderers and notes share it.
package plural

import "fmt"

// Integer is any integer type a count comes in (len, int32 replicas,
// int64 object counts).
type Integer interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

// Count is n and its noun: "1 wave", "0 waves", "2 waves".
func Count[N Integer](n N, one, many string) string {
	return fmt.Sprintf("%d %s", n, Noun(n, one, many))
}

// Noun is one when n is 1 and many otherwise, for text that writes the
// count apart ("1 of 1 pod", "3/3 pods").
func Noun[N Integer](n N, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
