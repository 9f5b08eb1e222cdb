package main

import (
	"io"
	"log/slog"

	"k8s.io/klog/v2"
)

// jsonLog is the JSON log of the controller and the gate, on w. client-go
// logs through klog (leader election, informers, reflectors), in klog's
// text format by default: klog is routed through the same handler, so
// that every line of the log is one JSON object.
func jsonLog(w io.Writer) *slog.Logger {
	log := slog.New(slog.NewJSONHandler(w, nil))
	klog.SetSlogLogger(log)
	return log
}
