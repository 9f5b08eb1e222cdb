package controlplane

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/rollplan/rollplan/gate/certs"
)

// KubernetesServiceIP is the ClusterIP of the `kubernetes` Service in the
// default namespace: the first address of envtest's service range
// (10.0.0.0/24). In-cluster clients connect to it.
const KubernetesServiceIP = "10.0.0.1"

// PodControllers are the kube-controller-manager controllers a control
// plane serving pods (Options.ServePods) runs besides Controllers: each
// namespace's default ServiceAccount, the kube-root-ca.crt ConfigMap that
// a pod's service-account volume projects, the EndpointSlices kube-proxy
// routes Services with (the gate's webhook, the kubernetes Service is
// the apiserver's own), and the namespace controller that empties a
// deleted namespace (uninstalling rollplan deletes rollplan-system).
var PodControllers = []string{
	"serviceaccount-controller",
	"root-ca-certificate-publisher-controller",
	"endpointslice-controller",
	"namespace-controller",
}

// HostIP is the address pods and the apiserver reach this host by: the
// source address of its default route. A kubelet refuses to register a
// loopback address, and pods cannot reach the host's loopback.
func HostIP() (string, error) {
	out, err := exec.Command("ip", "-4", "-o", "route", "get", "1.1.1.1").Output()
	if err != nil {
		return "", fmt.Errorf("host IP: ip route get: %w", err)
	}
	f := strings.Fields(string(out))
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "src" {
			return f[i+1], nil
		}
	}
	return "", fmt.Errorf("host IP: no src in %q", out)
}

// podServing is what ServePods adds to a control plane: a serving CA and
// a certificate for the addresses in-cluster clients reach the apiserver
// by. Those clients connect to KubernetesServiceIP (kube-proxy sends them on
// to the host's address) and trust the ca.crt of their service-account
// volume, which the controller-manager publishes from caFile.
type podServing struct {
	hostIP string
	caFile string
}

// preparePods writes a serving CA and a certificate for the host's address
// and the kubernetes Service's ClusterIP and names, and sets the
// apiserver's flags: it listens on every address and advertises the
// host's (the kubernetes Service's endpoint), serves that certificate on
// connections to the host's address (an IP "SNI" name: the apiserver
// matches it against the address a client without SNI reached, which is
// the host's after kube-proxy's DNAT), and admits pods with their
// service-account tokens (envtest disables the ServiceAccount admission
// plugin: it runs no controller to make the default account). Loopback
// keeps envtest's certificate, which every test's kubeconfig trusts.
func preparePods(dir string, api *envtest.APIServer) (*podServing, error) {
	ip, err := HostIP()
	if err != nil {
		return nil, err
	}
	certDir := filepath.Join(dir, "serving")
	if err := os.Mkdir(certDir, 0o700); err != nil {
		return nil, fmt.Errorf("control plane: %w", err)
	}
	// The gate's own certificate maker: a CA and a serving certificate it
	// signs, valid for a day (a test's control plane lives minutes).
	caPEM, certPEM, keyPEM, err := certs.ForHosts(
		[]string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		[]net.IP{net.ParseIP(ip), net.ParseIP(KubernetesServiceIP)}, 24*time.Hour, time.Now())
	if err != nil {
		return nil, fmt.Errorf("control plane: serving certificate: %w", err)
	}
	ps := &podServing{hostIP: ip, caFile: filepath.Join(certDir, "ca.crt")}
	for name, b := range map[string][]byte{"ca.crt": caPEM, "tls.crt": certPEM, "tls.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(certDir, name), b, 0o600); err != nil {
			return nil, fmt.Errorf("control plane: %w", err)
		}
	}
	args := api.Configure()
	args.Append("tls-sni-cert-key", filepath.Join(certDir, "tls.crt")+","+filepath.Join(certDir, "tls.key")+":"+ip)
	args.Set("bind-address", "0.0.0.0")
	args.Set("advertise-address", ip)
	args.Disable("disable-admission-plugins")
	return ps, nil
}

// kcmArgs are the controller-manager's flags for pods: the CA it publishes
// as kube-root-ca.crt in every namespace.
func (ps *podServing) kcmArgs() []string {
	return []string{"--root-ca-file=" + ps.caFile}
}
