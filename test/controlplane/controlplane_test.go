package controlplane

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rollplan/rollplan/internal/testobj"
	"github.com/rollplan/rollplan/planner/kubeversion"
)

// TestControlPlane starts every version built, each with the gate that
// differs between them set as its defaults do not.
func TestControlPlane(t *testing.T) {
	versions, err := Versions()
	if err != nil {
		t.Skip(err)
	}
	for _, v := range versions {
		t.Run(v, func(t *testing.T) { testControlPlane(t, v) })
	}
}

func testControlPlane(t *testing.T, version string) {
	ctx := context.Background()
	// MaxUnavailableStatefulSet: on by default from v1.37, so set the
	// opposite of the default to see the flag reach the apiserver.
	v, err := kubeversion.ParseAny(version)
	if err != nil {
		t.Fatal(err)
	}
	gateOn := !kubeversion.Gates(v)[kubeversion.MaxUnavailableStatefulSet]
	cp, err := Start(ctx, Options{Version: version, FeatureGates: map[string]bool{kubeversion.MaxUnavailableStatefulSet: gateOn}})
	if err != nil {
		t.Fatal(err)
	}
	dir := cp.dir
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cp.Stop()
		}
	})

	t.Run("apiserver reports the version asked for", func(t *testing.T) {
		if cp.Version != version {
			t.Fatalf("Version %q, want %q", cp.Version, version)
		}
		info, err := cp.Client.Discovery().ServerVersion()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(info.GitVersion, version+".") || info.GitVersion != cp.ServerVersion {
			t.Fatalf("server version %q (ServerVersion %q), want %s.<patch> (ldflags in the Makefile)", info.GitVersion, cp.ServerVersion, version)
		}
		if filepath.Base(cp.BinDir) != version {
			t.Fatalf("BinDir %s is not the %s build", cp.BinDir, version)
		}
		if _, err := os.Stat(filepath.Join(cp.BinDir, "kubectl")); err != nil {
			t.Errorf("kubectl beside the control plane: %v", err)
		}
	})

	t.Run("kubeconfig file authenticates as admin", func(t *testing.T) {
		cfg, err := clientcmd.BuildConfigFromFlags("", cp.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSuffix(cfg.Host, "/") != strings.TrimSuffix(cp.Config.Host, "/") {
			t.Fatalf("kubeconfig host %s, config host %s", cfg.Host, cp.Config.Host)
		}
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ok, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "*", Group: "*", Resource: "*"}},
		}, metav1.CreateOptions{})
		if err != nil || !ok.Status.Allowed {
			t.Fatalf("kubeconfig identity is not a cluster admin: %v %+v", err, ok)
		}
	})

	t.Run("feature gate reaches the apiserver", func(t *testing.T) {
		// With MaxUnavailableStatefulSet off the apiserver drops the field.
		sts := testobj.StatefulSet("default", "gate").Replicas(0).Image(image).MaxUnavailable("2").Obj()
		got, err := cp.Client.AppsV1().StatefulSets("default").Create(ctx, sts, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		kept := got.Spec.UpdateStrategy.RollingUpdate != nil && got.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable != nil
		if kept != gateOn {
			t.Fatalf("%s with MaxUnavailableStatefulSet=%t: maxUnavailable kept = %t: the gate did not reach the apiserver", version, gateOn, kept)
		}
	})

	t.Run("controller-manager runs the deployment and replicaset controllers", func(t *testing.T) {
		d := testobj.Deployment("default", "web").Replicas(2).Image(image).Obj()
		if _, err := cp.Client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			pods, err := cp.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			if err != nil {
				return false, err
			}
			return len(pods.Items) == 2, nil
		})
		if err != nil {
			t.Fatalf("the controllers did not create 2 pods for deployment/web: %v", err)
		}
	})

	if err := cp.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped = true
	if err := cp.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("Stop left %s behind (%v)", dir, err)
	}
	if out, err := exec.Command("pgrep", "-af", dir).Output(); err == nil {
		t.Fatalf("processes outlived Stop:\n%s", out)
	}
}

func TestBinDirErrorSaysWhatToDo(t *testing.T) {
	t.Setenv(BinEnv, "")
	_, err := BinDir()
	if err == nil || !strings.Contains(err.Error(), "make test-cluster") {
		t.Fatalf("BinDir with %s unset: %v", BinEnv, err)
	}
	t.Setenv(BinEnv, t.TempDir())
	_, err = BinDir()
	if err == nil || !strings.Contains(err.Error(), "make cluster-bin") {
		t.Fatalf("BinDir with an empty dir: %v", err)
	}
}

// fakeBuild makes a folder that looks like one version's build.
func fakeBuild(t *testing.T, dir string, bins ...string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, b := range bins {
		if err := os.WriteFile(filepath.Join(dir, b), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func TestVersionsListsCompleteBuilds(t *testing.T) {
	root := t.TempDir()
	all := []string{"etcd", "kube-apiserver", "kube-controller-manager", "kubectl"}
	fakeBuild(t, filepath.Join(root, "v1.37"), all...)
	fakeBuild(t, filepath.Join(root, "v1.36"), all...)
	fakeBuild(t, filepath.Join(root, "v1.38"), "etcd") // a build under way
	fakeBuild(t, filepath.Join(root, "notes"), all...)
	t.Setenv(BinEnv, root)
	got, err := Versions()
	if err != nil || strings.Join(got, " ") != "v1.36 v1.37" {
		t.Fatalf("Versions() = %v, %v; want [v1.36 v1.37]", got, err)
	}
	if dir, err := BinDir(); err != nil || dir != filepath.Join(root, "v1.37") {
		t.Fatalf("BinDir() = %s, %v; want the newest, %s/v1.37", dir, err, root)
	}
	if dir, err := VersionDir("v1.36.3"); err != nil || dir != filepath.Join(root, "v1.36") {
		t.Fatalf("VersionDir(v1.36.3) = %s, %v", dir, err)
	}
	if _, err := VersionDir("v1.35"); err == nil || !strings.Contains(err.Error(), "v1.36, v1.37") {
		t.Fatalf("VersionDir(v1.35) = %v; want an error naming the versions built", err)
	}

	// One version's folder: that version only.
	t.Setenv(BinEnv, filepath.Join(root, "v1.36"))
	if got, err := Versions(); err != nil || strings.Join(got, " ") != "v1.36" {
		t.Fatalf("Versions() on a version's folder = %v, %v", got, err)
	}

	// The layout before one folder per version.
	flat := t.TempDir()
	fakeBuild(t, flat, all...)
	t.Setenv(BinEnv, flat)
	if _, err := Versions(); err == nil || !strings.Contains(err.Error(), "one folder per version") {
		t.Fatalf("Versions() on a flat folder: %v", err)
	}
}

func TestStartRefusesAGateTheVersionLacks(t *testing.T) {
	t.Setenv(BinEnv, t.TempDir()) // nothing may start
	_, err := Start(context.Background(), Options{Version: "v1.36", FeatureGates: map[string]bool{kubeversion.StatefulSetRecreateStrategy: true}})
	if err == nil || !strings.Contains(err.Error(), "StatefulSetRecreateStrategy does not exist") {
		t.Fatalf("Start v1.36 with StatefulSetRecreateStrategy: %v", err)
	}
	if err := checkGates(kubeversion.V1_37, map[string]bool{kubeversion.StatefulSetRecreateStrategy: true, "SomeOtherGate": true}); err != nil {
		t.Fatalf("v1.37 has StatefulSetRecreateStrategy, and gates rollplan does not model pass through: %v", err)
	}
}

func TestGateFlagIsSorted(t *testing.T) {
	got := gateFlag(map[string]bool{"B": false, "A": true})
	if got != "A=true,B=false" {
		t.Fatalf("gateFlag = %q", got)
	}
}

// image is the image of the workloads the tests create.
const image = "registry.example/app:1"
