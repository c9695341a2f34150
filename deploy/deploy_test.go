// Package deploy holds the deployment files (Dockerfile, compose,
// Kubernetes, systemd); this test checks them against each other and
// against the real binaries: every flag they pass exists, every Secret,
// volume and service they name is defined, and the tools that can check
// them offline (systemd-analyze, kubectl kustomize, openssl) agree.
package deploy

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"github.com/decreehq/decree/internal/testtool"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	cauth "github.com/decreehq/decree/controller/auth"
	pauth "github.com/decreehq/decree/pkg/auth"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testtool.Cleanup()
	os.Exit(code)
}

// knownFlags are the flags a program accepts, from its own -help (flag
// package) or --help (cobra) output.
func knownFlags(t *testing.T, prog string) []string {
	t.Helper()
	bin := testtool.Binaries(t)
	arg := "-help"
	if prog == "decreectl" {
		arg = "--help"
	}
	out, _ := exec.Command(filepath.Join(bin, prog), arg).CombinedOutput()
	var flags []string
	for _, m := range regexp.MustCompile(`(?m)^\s+(?:-(\w), )?--?([a-z][a-z0-9-]*)`).FindAllStringSubmatch(string(out), -1) {
		if m[1] != "" {
			flags = append(flags, m[1])
		}
		flags = append(flags, m[2])
	}
	if len(flags) < 3 {
		t.Fatalf("could not read the flags of %s from its help:\n%s", prog, out)
	}
	return flags
}

// checkFlags fails for every --flag in args that prog does not accept.
func checkFlags(t *testing.T, where, prog string, args []string) {
	t.Helper()
	known := knownFlags(t, prog)
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !slices.Contains(known, name) {
			t.Errorf("%s passes %s to %s, which does not accept it (known: %v)", where, a, prog, known)
		}
	}
}

// flagValue returns the value of --name=value or --name value in args.
func flagValue(args []string, name string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
		if a == "--"+name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// dockerTargets are the stage names of the Dockerfile.
func dockerTargets(t *testing.T) []string {
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile(`(?mi)^FROM\s+\S+\s+AS\s+(\S+)`).FindAllStringSubmatch(string(b), -1) {
		out = append(out, m[1])
	}
	return out
}

func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	targets := dockerTargets(t)
	for _, want := range []string{"build", "controller", "worker", "worker-notebook"} {
		if !slices.Contains(targets, want) {
			t.Errorf("Dockerfile has no stage %q (stages: %v)", want, targets)
		}
	}
	for _, want := range []string{"CGO_ENABLED=0", "./cmd/decreectl", "./cmd/decree-controller", "./cmd/decree-worker", "./cmd/decree-driver-tree", "/out/decree-driver-tree", "./cmd/decree-supervisor", "/out/decree-supervisor", "bash", "jupyter-nbconvert"} {
		if !strings.Contains(s, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	// Every package it builds exists.
	for _, m := range regexp.MustCompile(`\./cmd/[a-z-]+`).FindAllString(s, -1) {
		if _, err := os.Stat(filepath.Join("..", m)); err != nil {
			t.Errorf("Dockerfile builds %s, which does not exist", m)
		}
	}
}

type composeFile struct {
	Services map[string]struct {
		Image       string `yaml:"image"`
		Build       struct{ Target, Dockerfile, Context string }
		Entrypoint  []string          `yaml:"entrypoint"`
		Command     []string          `yaml:"command"`
		Secrets     []string          `yaml:"secrets"`
		Volumes     []string          `yaml:"volumes"`
		Ports       []string          `yaml:"ports"`
		Environment map[string]string `yaml:"environment"`
		User        string            `yaml:"user"`
	} `yaml:"services"`
	Secrets map[string]struct{ File string } `yaml:"secrets"`
}

func TestCompose(t *testing.T) {
	var c composeFile
	readYAML(t, "compose.yaml", &c)
	targets := dockerTargets(t)
	images := map[string]string{} // image -> target
	for name, s := range c.Services {
		if s.Build.Target != "" {
			if !slices.Contains(targets, s.Build.Target) {
				t.Errorf("service %s builds target %q, not in the Dockerfile", name, s.Build.Target)
			}
			if s.Build.Dockerfile != "deploy/Dockerfile" || s.Build.Context != ".." {
				t.Errorf("service %s builds %s in %s; want deploy/Dockerfile from the repository root (..)", name, s.Build.Dockerfile, s.Build.Context)
			}
			images[s.Image] = s.Build.Target
		}
		for _, sec := range s.Secrets {
			if _, ok := c.Secrets[sec]; !ok {
				t.Errorf("service %s uses secret %s, which is not defined", name, sec)
			}
		}
		// Every /run/secrets/X it names is one of its secrets.
		for _, a := range s.Command {
			if i := strings.Index(a, "/run/secrets/"); i >= 0 {
				if sec := a[i+len("/run/secrets/"):]; !slices.Contains(s.Secrets, sec) {
					t.Errorf("service %s reads %s but does not mount secret %s", name, a, sec)
				}
			}
		}
		if s.User == "" {
			t.Errorf("service %s runs as the image's user; the secrets (mode 0600) need the owner's uid", name)
		}
	}
	ctl, ok := c.Services["controller"]
	if !ok || images[ctl.Image] != "controller" {
		t.Fatalf("no controller service running the controller image (images: %v)", images)
	}
	checkFlags(t, "compose controller", "decree-controller", ctl.Command)
	for _, f := range []string{"listen", "tls-cert", "tls-key", "client-token-file", "worker-token-file"} {
		if flagValue(ctl.Command, f) == "" {
			t.Errorf("compose controller has no --%s", f)
		}
	}
	_, port, _ := net.SplitHostPort(flagValue(ctl.Command, "listen"))
	var workspaces []string
	for _, name := range []string{"worker-a", "worker-b"} {
		w, ok := c.Services[name]
		if !ok {
			t.Fatalf("compose has no service %s", name)
		}
		if images[w.Image] != "worker" {
			t.Errorf("%s runs image %s (target %q), want the worker target", name, w.Image, images[w.Image])
		}
		checkFlags(t, "compose "+name, "decree-worker", w.Command)
		if got := w.Environment["DECREE_CONTROLLER"]; got != "controller:"+port {
			t.Errorf("%s dials %q; the controller service listens on controller:%s", name, got, port)
		}
		if flagValue(w.Command, "token-file") != "/run/secrets/worker.token" || flagValue(w.Command, "tls-ca") == "" {
			t.Errorf("%s does not use the worker token and the CA: %v", name, w.Command)
		}
		ws := flagValue(w.Command, "workspace")
		for _, v := range w.Volumes {
			if strings.HasSuffix(v, ":"+ws) {
				workspaces = append(workspaces, v)
			}
		}
	}
	if len(workspaces) != 2 || workspaces[0] == workspaces[1] {
		t.Errorf("the two workers need workspaces of their own; mounts: %v", workspaces)
	}
	if init, ok := c.Services["init"]; ok {
		checkFlags(t, "compose init", "decreectl", init.Command)
	}
}

// k8sObject is the part of a manifest the checks read.
type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
	Spec       struct {
		Replicas int                  `yaml:"replicas"`
		Selector map[string]any       `yaml:"selector"`
		Ports    []struct{ Port int } `yaml:"ports"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
		VolumeClaimTemplates []struct {
			Metadata struct{ Name string } `yaml:"metadata"`
		} `yaml:"volumeClaimTemplates"`
	} `yaml:"spec"`
}

type podSpec struct {
	SecurityContext struct {
		FSGroup int `yaml:"fsGroup"`
	} `yaml:"securityContext"`
	InitContainers []container `yaml:"initContainers"`
	Containers     []container `yaml:"containers"`
	Volumes        []struct {
		Name   string `yaml:"name"`
		Secret *struct {
			SecretName  string `yaml:"secretName"`
			DefaultMode int    `yaml:"defaultMode"`
			Items       []struct{ Key, Path string }
		} `yaml:"secret"`
		ConfigMap *struct {
			Name  string
			Items []struct{ Key, Path string }
		} `yaml:"configMap"`
	} `yaml:"volumes"`
}

type container struct {
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []struct {
		Name      string
		ValueFrom *struct {
			ConfigMapKeyRef *struct{ Name, Key string } `yaml:"configMapKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

func readK8s(t *testing.T) map[string]*k8sObject {
	t.Helper()
	objs := map[string]*k8sObject{}
	files, _ := filepath.Glob("k8s/*.yaml")
	base, _ := filepath.Glob("k8s/base/*.yaml")
	files = append(files, base...)
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var o k8sObject
			if err := dec.Decode(&o); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			objs[o.Kind+"/"+o.Metadata.Name] = &o
		}
	}
	return objs
}

// secretFile resolves a path in a container to (secret name, key) through
// its volume mounts, or "" when it is not on a Secret volume.
func secretFile(p podSpec, c container, path string) (string, string) {
	for _, m := range c.VolumeMounts {
		rel, ok := strings.CutPrefix(path, m.MountPath+"/")
		if !ok {
			continue
		}
		for _, v := range p.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			if len(v.Secret.Items) == 0 {
				return v.Secret.SecretName, rel
			}
			for _, it := range v.Secret.Items {
				if it.Path == rel {
					return v.Secret.SecretName, it.Key
				}
			}
		}
	}
	return "", ""
}

func TestKubernetes(t *testing.T) {
	objs := readK8s(t)
	sts, dep, svc := objs["StatefulSet/decree-controller"], objs["Deployment/decree-worker"], objs["Service/decree-controller"]
	if sts == nil || dep == nil || svc == nil {
		t.Fatalf("want StatefulSet and Service decree-controller and Deployment decree-worker; have %v", slices.Collect(mapKeys(objs)))
	}
	if sts.Spec.Replicas != 1 {
		t.Errorf("the controller StatefulSet has %d replicas; a project has exactly one controller", sts.Spec.Replicas)
	}
	// The project lives on the claim template.
	if len(sts.Spec.VolumeClaimTemplates) != 1 {
		t.Fatalf("the controller has no volume claim template for the project")
	}
	claim := sts.Spec.VolumeClaimTemplates[0].Metadata.Name
	cp := sts.Spec.Template.Spec
	ctl := cp.Containers[0]
	checkFlags(t, "StatefulSet", "decree-controller", ctl.Args)
	project := flagValue(ctl.Args, "project")
	mounted := false
	for _, m := range ctl.VolumeMounts {
		mounted = mounted || (m.Name == claim && m.MountPath == project)
	}
	if !mounted {
		t.Errorf("--project %s is not the mount of the claim %s", project, claim)
	}
	for _, ic := range cp.InitContainers {
		checkFlags(t, "StatefulSet init container", "decreectl", ic.Command[1:])
	}
	// Token and TLS files come from Secrets that exist and hold those keys.
	for _, f := range []string{"client-token-file", "worker-token-file", "tls-cert", "tls-key"} {
		name, key := secretFile(cp, ctl, flagValue(ctl.Args, f))
		sec := objs["Secret/"+name]
		if sec == nil {
			t.Errorf("controller --%s %s is not on a Secret volume defined in k8s/", f, flagValue(ctl.Args, f))
			continue
		}
		if _, ok := sec.StringData[key]; !ok {
			t.Errorf("controller --%s reads key %q of Secret %s, which has no such key", f, key, name)
		}
	}
	// The Service selects the controller pod and serves its --listen port.
	for k, v := range svc.Spec.Selector {
		if sts.Spec.Template.Metadata.Labels[k] != v {
			t.Errorf("Service selector %s=%v does not match the controller pod", k, v)
		}
	}
	_, port, _ := net.SplitHostPort(flagValue(ctl.Args, "listen"))
	_, mport, _ := net.SplitHostPort(flagValue(ctl.Args, "metrics-listen"))
	if len(svc.Spec.Ports) != 2 || port == "" || strings.TrimSpace(port) != strconv.Itoa(svc.Spec.Ports[0].Port) || mport != strconv.Itoa(svc.Spec.Ports[1].Port) {
		t.Errorf("Service ports %v do not match --listen %s and --metrics-listen %s", svc.Spec.Ports, flagValue(ctl.Args, "listen"), flagValue(ctl.Args, "metrics-listen"))
	}

	// Workers: the worker token only, the CA from the ConfigMap, the
	// controller address from the ConfigMap naming the Service.
	wp := dep.Spec.Template.Spec
	wk := wp.Containers[0]
	checkFlags(t, "Deployment", "decree-worker", wk.Args)
	name, key := secretFile(wp, wk, flagValue(wk.Args, "token-file"))
	if name != "decree-tokens" || key != "worker.token" {
		t.Errorf("worker --token-file resolves to Secret %q key %q; want decree-tokens worker.token", name, key)
	}
	for _, v := range wp.Volumes {
		if v.Secret != nil {
			for _, it := range v.Secret.Items {
				if it.Key != "worker.token" {
					t.Errorf("workers mount Secret key %s; they must hold only the worker token", it.Key)
				}
			}
			if len(v.Secret.Items) == 0 {
				t.Errorf("workers mount the whole Secret %s, client token included", v.Secret.SecretName)
			}
		}
	}
	cm := objs["ConfigMap/decree-config"]
	for _, e := range wk.Env {
		if e.Name == "DECREE_CONTROLLER" {
			ref := e.ValueFrom.ConfigMapKeyRef
			if ref == nil || cm == nil || cm.Data[ref.Key] != svc.Metadata.Name+":"+port {
				t.Errorf("DECREE_CONTROLLER does not come from a ConfigMap entry naming %s:%s", svc.Metadata.Name, port)
			}
		}
	}
	// Secret volumes: group-readable at most (decree refuses others' bits),
	// and the pod's fsGroup lets the non-root user read them.
	for _, p := range []podSpec{cp, wp} {
		for _, v := range p.Volumes {
			if v.Secret == nil {
				continue
			}
			if v.Secret.DefaultMode&0o007 != 0 || v.Secret.DefaultMode == 0 {
				t.Errorf("Secret volume %s has defaultMode %o; decree refuses token files other users can read (use 0440)", v.Name, v.Secret.DefaultMode)
			}
			if p.SecurityContext.FSGroup == 0 {
				t.Errorf("a pod mounting Secret %s has no fsGroup, so its non-root user cannot read a 0440 file", v.Secret.SecretName)
			}
		}
	}
	// The placeholders must be refused by decree, never used as tokens.
	for _, k := range []string{"client.token", "worker.token"} {
		if err := pauth.CheckToken(objs["Secret/decree-tokens"].StringData[k]); err == nil {
			t.Errorf("the placeholder for %s would be accepted as a token", k)
		}
	}
}

func TestKustomizeBuilds(t *testing.T) {
	testtool.Require(t, "kubectl")
	out, err := exec.Command("kubectl", "kustomize", "k8s").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize k8s: %v\n%s", err, out)
	}
	for _, want := range []string{"kind: StatefulSet", "kind: Deployment", "kind: Service", "kind: Secret", "kind: ConfigMap"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("kustomize output lacks %q", want)
		}
	}
	out, err = exec.Command("kubectl", "kustomize", "k8s/keda").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize k8s/keda: %v\n%s", err, out)
	}
	for _, want := range []string{"kind: StatefulSet", "kind: ScaledJob", "kind: TriggerAuthentication"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("kustomize output of k8s/keda lacks %q", want)
		}
	}
}

func TestSystemdUnits(t *testing.T) {
	testtool.Require(t, "systemd-analyze")
	bin := testtool.Binaries(t)
	// An alternate root holding the binaries where the units expect them,
	// so verify can check ExecStart too.
	root := t.TempDir()
	unitDir := filepath.Join(root, "etc", "systemd", "system")
	for _, d := range []string{filepath.Join(root, "usr", "local", "bin"), unitDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"decree-controller", "decree-worker"} {
		b, err := os.ReadFile(filepath.Join(bin, p))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "usr", "local", "bin", p), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	units, _ := filepath.Glob("systemd/*.service")
	if len(units) != 2 {
		t.Fatalf("want decree-controller.service and decree-worker@.service, have %v", units)
	}
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(unitDir, filepath.Base(u)), b, 0o644); err != nil {
			t.Fatal(err)
		}
		// The flags in ExecStart exist.
		exec := regexp.MustCompile(`(?ms)^ExecStart=(.*?[^\\])$`).FindStringSubmatch(string(b))
		if exec == nil {
			t.Fatalf("%s has no ExecStart", u)
		}
		args := strings.Fields(strings.ReplaceAll(exec[1], "\\\n", " "))
		checkFlags(t, u, filepath.Base(args[0]), args[1:])
	}
	for _, unit := range []string{"decree-controller.service", "decree-worker@a.service"} {
		cmd := exec.Command("systemd-analyze", "verify", "--man=no", "--recursive-errors=no", "--root="+root, unit)
		out, err := cmd.CombinedOutput()
		if err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("systemd-analyze verify %s: %v\n%s", unit, err, out)
		}
	}
}

func TestGenTestCerts(t *testing.T) {
	testtool.Require(t, "openssl")
	testtool.Require(t, "bash")
	dir := filepath.Join(t.TempDir(), "secrets")
	out, err := exec.Command("bash", "gen-test-certs.sh", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("gen-test-certs.sh: %v\n%s", err, out)
	}
	pool, err := pauth.LoadCertPool(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(name string) *x509.Certificate {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(b)
		if blk == nil {
			t.Fatalf("%s is not PEM", name)
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	srv := leaf("controller.crt")
	for _, name := range []string{"controller", "decree-controller", "localhost", "127.0.0.1"} {
		if _, err := srv.Verify(x509.VerifyOptions{Roots: pool, DNSName: name}); err != nil {
			t.Errorf("the controller certificate is not valid for %s: %v", name, err)
		}
	}
	if _, err := leaf("client.crt").Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the client certificate does not verify for client auth: %v", err)
	}
	for _, f := range []string{"controller.key", "client.key", "ca.key", "client.token", "worker.token"} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", f, err, fi.Mode().Perm())
		}
	}
	// The controller accepts the whole set, mutual TLS included.
	_, err = cauth.New(cauth.Config{
		Listen:   []string{"0.0.0.0:7443"},
		CertFile: filepath.Join(dir, "controller.crt"), KeyFile: filepath.Join(dir, "controller.key"),
		ClientCAFile:    filepath.Join(dir, "ca.crt"),
		ClientTokenFile: filepath.Join(dir, "client.token"), WorkerTokenFile: filepath.Join(dir, "worker.token"),
	}, nil)
	if err != nil {
		t.Errorf("the controller refuses the generated material: %v", err)
	}
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// dockerStages maps each stage of the Dockerfile to its base (a stage name
// or an image) and the programs it copies into /usr/local/bin from the
// build stage.
func dockerStages(t *testing.T) map[string]struct {
	base     string
	programs []string
} {
	t.Helper()
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	type stage = struct {
		base     string
		programs []string
	}
	stages := map[string]stage{}
	cur := ""
	from := regexp.MustCompile(`(?i)^FROM\s+(\S+)\s+AS\s+(\S+)`)
	cp := regexp.MustCompile(`(?i)^COPY\s+--from=build\s+(.*)\s+/usr/local/bin/?$`)
	for _, line := range strings.Split(string(b), "\n") {
		if m := from.FindStringSubmatch(line); m != nil {
			cur = m[2]
			stages[cur] = stage{base: m[1]}
			continue
		}
		if m := cp.FindStringSubmatch(line); m != nil && cur != "" {
			s := stages[cur]
			for _, f := range strings.Fields(m[1]) {
				s.programs = append(s.programs, filepath.Base(f))
			}
			stages[cur] = s
		}
	}
	return stages
}

// TestDockerImagesHoldPrograms checks every target of the Dockerfile holds
// the programs deploy/README.md's table promises for it (a stage built
// FROM another has that one's too), and that every image that runs
// routines has the decision-tree driver and the supervisor.
func TestDockerImagesHoldPrograms(t *testing.T) {
	stages := dockerStages(t)
	has := func(target string) []string {
		var out []string
		for name, seen := target, 0; seen < 10; seen++ {
			s, ok := stages[name]
			if !ok {
				break
			}
			out = append(out, s.programs...)
			name = s.base
		}
		return out
	}
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z-]+)` \\| (`decree.*)\\|\\s*$")
	promised := map[string][]string{}
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		for _, p := range regexp.MustCompile("`([a-z-]+)`").FindAllStringSubmatch(m[2], -1) {
			promised[m[1]] = append(promised[m[1]], p[1])
		}
	}
	for _, target := range dockerTargets(t) {
		if target == "build" {
			continue
		}
		want, ok := promised[target]
		if !ok {
			t.Errorf("deploy/README.md's table of images does not list target %s", target)
			continue
		}
		if target != "controller" {
			for _, p := range []string{"decree-driver-tree", "decree-supervisor"} {
				if !slices.Contains(want, p) {
					t.Errorf("deploy/README.md promises target %s without %s, which its routines need", target, p)
				}
			}
		}
		got := has(target)
		for _, p := range want {
			if !slices.Contains(got, p) {
				t.Errorf("Dockerfile target %s does not copy %s (it copies %v)", target, p, got)
			}
		}
	}
	if len(promised) < 4 {
		t.Errorf("deploy/README.md's table of images lists only %v", promised)
	}
}
