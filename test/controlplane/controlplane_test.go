package controlplane

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

func TestControlPlane(t *testing.T) {
	if _, err := BinDir(); err != nil {
		t.Skip(err)
	}
	ctx := context.Background()
	cp, err := Start(ctx, Options{FeatureGates: map[string]bool{"MaxUnavailableStatefulSet": true}})
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

	t.Run("apiserver reports the pinned version", func(t *testing.T) {
		v, err := cp.Client.Discovery().ServerVersion()
		if err != nil {
			t.Fatal(err)
		}
		if v.GitVersion != "v1.36.3" {
			t.Fatalf("server version %q, want v1.36.3 (ldflags in the Makefile)", v.GitVersion)
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
		sts := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: "gate", Namespace: "default"},
			Spec: appsv1.StatefulSetSpec{
				Replicas: ptr.To[int32](0),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "gate"}},
				Template: podTemplate("gate"),
				UpdateStrategy: appsv1.StatefulSetUpdateStrategy{
					Type: appsv1.RollingUpdateStatefulSetStrategyType,
					RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{
						MaxUnavailable: ptr.To(intstr.FromInt32(2)),
					},
				},
			},
		}
		got, err := cp.Client.AppsV1().StatefulSets("default").Create(ctx, sts, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ru := got.Spec.UpdateStrategy.RollingUpdate; ru == nil || ru.MaxUnavailable == nil {
			t.Fatal("maxUnavailable dropped: the MaxUnavailableStatefulSet gate is not on in the apiserver")
		}
	})

	t.Run("controller-manager runs the deployment and replicaset controllers", func(t *testing.T) {
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](2),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Template: podTemplate("web"),
			},
		}
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

func TestGateFlagIsSorted(t *testing.T) {
	got := gateFlag(map[string]bool{"B": false, "A": true})
	if got != "A=true,B=false" {
		t.Fatalf("gateFlag = %q", got)
	}
}

func podTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
	}
}
