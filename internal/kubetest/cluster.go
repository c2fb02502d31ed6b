package kubetest

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	istioclient "istio.io/client-go/pkg/clientset/versioned"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Options selects what Start installs besides the core API.
type Options struct {
	// IstioCRDs installs Istio's CustomResourceDefinitions (from the
	// istio.io/api module) and waits until they are Established.
	IstioCRDs bool
}

// Cluster is a running etcd and kube-apiserver.
type Cluster struct {
	// Kubeconfig is the path of an admin kubeconfig file (for kubectl and
	// for `pilotfish serve --kubeconfig`).
	Kubeconfig string
	// Config is the admin's client configuration.
	Config *rest.Config
	// Client, Dynamic and Istio are clientsets built from Config.
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	Istio   istioclient.Interface
	// URL is the apiserver's https://127.0.0.1:port.
	URL string
	// CAPEM is the PEM CA certificate that signed the apiserver's serving
	// certificate and the admin's client certificate.
	CAPEM []byte
	// BinDir holds etcd, kube-apiserver and kubectl.
	BinDir string
	// Issuer is the service-account token issuer (and default audience).
	Issuer string
	// EtcdURL is etcd's client URL (http://127.0.0.1:port).
	EtcdURL string

	etcd, apiserver *process
}

// Issuer of the cluster's service-account tokens, as in a kubeadm cluster.
const defaultIssuer = "https://kubernetes.default.svc.cluster.local"

// Start runs etcd and kube-apiserver for t and waits until the apiserver is
// ready (and, with o.IstioCRDs, the Istio CRDs are Established). t.Cleanup
// stops both.
func Start(t testing.TB, o Options) *Cluster {
	t.Helper()
	bin := BinDir(t)
	dir := t.TempDir()
	ports := freePorts(t, 3)
	c := &Cluster{BinDir: bin, Issuer: defaultIssuer, URL: "https://127.0.0.1:" + strconv.Itoa(ports[2])}
	begin := time.Now()

	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	c.EtcdURL = etcdURL
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	c.etcd = &process{
		name: "etcd",
		path: filepath.Join(bin, etcdBin),
		log:  filepath.Join(dir, "etcd.log"),
		args: []string{
			"--name=kubetest",
			"--data-dir=" + filepath.Join(dir, "etcd"),
			"--listen-client-urls=" + etcdURL,
			"--advertise-client-urls=" + etcdURL,
			"--listen-peer-urls=" + peerURL,
			"--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=kubetest=" + peerURL,
			// A test cluster's data need not survive a power cut; fsync
			// would dominate the apiserver's write latency.
			"--unsafe-no-fsync",
			"--log-level=warn",
		},
	}
	if err := c.etcd.start(); err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	t.Cleanup(func() { c.etcd.logTail(t); c.etcd.stop() })

	p, err := newPKI(dir)
	if err != nil {
		t.Fatalf("kubetest: certificates: %v", err)
	}
	c.CAPEM = p.caPEM
	c.apiserver = &process{
		name: "kube-apiserver",
		path: filepath.Join(bin, apiserverBin),
		log:  filepath.Join(dir, "kube-apiserver.log"),
		args: []string{
			"--etcd-servers=" + etcdURL,
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(ports[2]),
			"--cert-dir=" + filepath.Join(dir, "apiserver-certs"),
			"--tls-cert-file=" + p.servingCert,
			"--tls-private-key-file=" + p.servKey,
			"--client-ca-file=" + p.caFile,
			"--service-account-issuer=" + c.Issuer,
			"--service-account-key-file=" + p.saKeyFile,
			"--service-account-signing-key-file=" + p.saKeyFile,
			"--service-cluster-ip-range=10.96.0.0/16",
			"--authorization-mode=RBAC",
			// No controller-manager creates the default service
			// accounts this plugin would require of every pod.
			"--disable-admission-plugins=ServiceAccount",
			"--allow-privileged=true",
			"--profiling=false",
			"--v=1",
		},
	}
	if err := c.apiserver.start(); err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	t.Cleanup(func() { c.apiserver.logTail(t); c.apiserver.stop() })

	c.Config = &rest.Config{
		Host: c.URL,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   p.caPEM,
			CertData: p.adminCert,
			KeyData:  p.adminKey,
		},
		QPS:   200,
		Burst: 400,
	}
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	if c.Dynamic, err = dynamic.NewForConfig(c.Config); err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	if c.Istio, err = istioclient.NewForConfig(c.Config); err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	c.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(c.Kubeconfig, c.URL, p); err != nil {
		t.Fatalf("kubetest: kubeconfig: %v", err)
	}
	c.waitReady(t)
	t.Logf("kubetest: etcd and kube-apiserver ready at %s in %v", c.URL, time.Since(begin).Round(time.Millisecond))
	if o.IstioCRDs {
		c.InstallIstioCRDs(t)
	}
	return c
}

// RestartAPIServer stops the apiserver and starts it again on the same port
// with the same flags, keeping etcd and so every object, and waits until it
// is ready. Clients built from Config keep working across it.
func (c *Cluster) RestartAPIServer(t testing.TB) {
	t.Helper()
	c.apiserver.stop()
	if err := c.apiserver.start(); err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	c.waitReady(t)
}

// waitReady polls /readyz until the apiserver answers ok, failing t after
// two minutes or when a process exits.
func (c *Cluster) waitReady(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var last error
	for {
		for _, p := range []*process{c.etcd, c.apiserver} {
			if p.exited() {
				t.Fatalf("kubetest: %s exited during startup (its log follows)", p.name)
			}
		}
		body, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && string(body) == "ok" {
			return
		}
		last = fmt.Errorf("%v %s", err, body)
		select {
		case <-ctx.Done():
			t.Fatalf("kubetest: kube-apiserver not ready after 2m: %v", last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// freePorts returns n distinct free TCP ports on 127.0.0.1. They are free
// when returned; another process could take one before the child binds it,
// which the startup check then reports.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("kubetest: %v", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

func writeKubeconfig(path, url string, p *pki) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: url, CertificateAuthorityData: p.caPEM}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: p.adminCert, ClientKeyData: p.adminKey}
	cfg.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: "admin", Namespace: "default"}
	cfg.CurrentContext = "kubetest"
	return clientcmd.WriteToFile(*cfg, path)
}
