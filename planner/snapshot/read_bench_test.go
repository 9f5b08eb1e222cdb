package snapshot_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/rollplan/rollplan/internal/measure"
	"github.com/rollplan/rollplan/internal/synth"
	"github.com/rollplan/rollplan/planner/snapshot"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

// BenchmarkRead: reading a synthetic snapshot written by capture.Marshal
// (LoadFiles: read, decode, strict checks, merge, then Digest) side by side
// with client-go's deserializer decoding the same bytes (the v1 List, then
// each item, into typed objects), for JSON and YAML at 20k and 150k pods.
// rollplan reports x-client-go, its wall time over client-go's measured
// in the same run, cpu-x-client-go the same for CPU time (steadier on a
// shared machine; rollplan decodes on every core), peak-x-file its peak heap over the file's size, and
// live-x-file the heap the snapshot keeps (the typed objects) over it.
//
//	go test ./planner/snapshot -run '^$' -bench 'Read/20k' -benchtime 3x
//	go test ./planner/snapshot -run '^$' -bench 'Read/150k' -benchtime 1x -timeout 30m
func BenchmarkRead(b *testing.B) {
	dir := b.TempDir()
	for _, n := range []int{20000, 150000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			snap := synth.Snapshot(n)
			for _, format := range []string{capture.FormatJSON, capture.FormatYAML} {
				data, err := capture.Marshal(snap, format)
				if err != nil {
					b.Fatal(err)
				}
				file := filepath.Join(dir, fmt.Sprintf("snap-%d.%s", n, format))
				if err := os.WriteFile(file, data, 0o644); err != nil {
					b.Fatal(err)
				}
				size := len(data)
				data = nil
				// clientGo and clientGoCPU are client-go's mean wall and
				// CPU times, for the ratios.
				var clientGo, clientGoCPU time.Duration
				b.Run(format+"/client-go", func(b *testing.B) {
					var total, cpu time.Duration
					n := 0
					for b.Loop() {
						start, cpu0 := time.Now(), measure.CPU()
						if err := clientGoDecode(file); err != nil {
							b.Fatal(err)
						}
						total += time.Since(start)
						cpu += measure.CPU() - cpu0
						n++
					}
					clientGo, clientGoCPU = total/time.Duration(n), cpu/time.Duration(n)
					b.ReportMetric(float64(size)/(1<<20), "MiB-file")
				})
				b.Run(format+"/rollplan", func(b *testing.B) {
					var peak, live uint64
					var took, cpu time.Duration
					n := 0
					for b.Loop() {
						b.StopTimer()
						runtime.GC()
						b.StartTimer()
						heap := measure.SampleHeap()
						start, cpu0 := time.Now(), measure.CPU()
						s, _, err := snapshot.LoadFiles([]string{file})
						if err != nil {
							b.Fatal(err)
						}
						if _, err := s.Digest(); err != nil {
							b.Fatal(err)
						}
						took += time.Since(start)
						cpu += measure.CPU() - cpu0
						n++
						peak = max(peak, heap())
						b.StopTimer()
						runtime.GC()
						var ms runtime.MemStats
						runtime.ReadMemStats(&ms)
						live = ms.HeapAlloc
						runtime.KeepAlive(s)
						b.StartTimer()
					}
					b.ReportMetric(float64(peak)/float64(size), "peak-x-file")
					b.ReportMetric(float64(live)/float64(size), "live-x-file")
					if clientGo > 0 {
						b.ReportMetric(float64(took)/float64(n)/float64(clientGo), "x-client-go")
						b.ReportMetric(float64(cpu)/float64(n)/float64(clientGoCPU), "cpu-x-client-go")
					}
				})
			}
		})
	}
}

// clientGoDecode decodes a snapshot file as client-go would: the
// universal deserializer reads the v1 List (YAML through its JSON
// conversion), then each item into its typed object.
func clientGoDecode(file string) error {
	scheme := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	dec := serializer.NewCodecFactory(scheme).UniversalDeserializer()
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	obj, _, err := dec.Decode(data, nil, nil)
	if err != nil {
		return err
	}
	list, ok := obj.(*corev1.List)
	if !ok {
		return fmt.Errorf("decoded %T, want *v1.List", obj)
	}
	for i, item := range list.Items {
		if _, _, err := dec.Decode(item.Raw, nil, nil); err != nil {
			return fmt.Errorf("items[%d]: %w", i, err)
		}
	}
	return nil
}
