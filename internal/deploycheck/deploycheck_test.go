package deploycheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/gpreduce/gpreduce/internal/cli"
)

// objects is a built kustomization, decoded strictly by kind.
type objects struct {
	services     []corev1.Service
	configMaps   []corev1.ConfigMap
	secrets      []corev1.Secret
	statefulSets []appsv1.StatefulSet
	deployments  []appsv1.Deployment
	hpas         []autoscalingv2.HorizontalPodAutoscaler
	pdbs         []policyv1.PodDisruptionBudget
	netpols      []networkingv1.NetworkPolicy
	custom       []metav1.PartialObjectMetadata // kinds of CRDs (cert-manager), checked by name only
}

// customGroups are the API groups whose objects are accepted without a Go type to decode into.
var customGroups = []string{"cert-manager.io/v1"}

// build copies deploy/k8s to a temporary directory, writes placeholder token files where
// gen-secrets.sh would, and builds the kustomization at dir (relative to deploy/k8s) with
// the kustomize library, decoding every object strictly.
func build(t *testing.T, dir string) *objects {
	t.Helper()
	src, err := filepath.Abs(filepath.Join("..", "..", "deploy", "k8s"))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	err = filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			if rel == filepath.Join("base", "secrets") {
				return filepath.SkipDir // a developer's real tokens: never read them here
			}
			return os.MkdirAll(filepath.Join(root, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(root, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "base", "secrets"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"api-token", "join-token", "raft-secret"} {
		if err := os.WriteFile(filepath.Join(root, "base", "secrets", name), []byte("placeholder-"+name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(root, dir))
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out := &objects{}
	for _, r := range m.Resources() {
		b, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		what := r.GetKind() + "/" + r.GetName()
		var err2 error
		switch gvk := r.GetGvk(); gvk.ApiVersion() + "/" + gvk.Kind {
		case "v1/Service":
			out.services = append(out.services, decode[corev1.Service](t, what, b))
		case "v1/ConfigMap":
			out.configMaps = append(out.configMaps, decode[corev1.ConfigMap](t, what, b))
		case "v1/Secret":
			out.secrets = append(out.secrets, decode[corev1.Secret](t, what, b))
		case "apps/v1/StatefulSet":
			out.statefulSets = append(out.statefulSets, decode[appsv1.StatefulSet](t, what, b))
		case "apps/v1/Deployment":
			out.deployments = append(out.deployments, decode[appsv1.Deployment](t, what, b))
		case "autoscaling/v2/HorizontalPodAutoscaler":
			out.hpas = append(out.hpas, decode[autoscalingv2.HorizontalPodAutoscaler](t, what, b))
		case "policy/v1/PodDisruptionBudget":
			out.pdbs = append(out.pdbs, decode[policyv1.PodDisruptionBudget](t, what, b))
		case "networking.k8s.io/v1/NetworkPolicy":
			out.netpols = append(out.netpols, decode[networkingv1.NetworkPolicy](t, what, b))
		default:
			if !slices.Contains(customGroups, gvk.ApiVersion()) {
				err2 = fmt.Errorf("%s: %s %s has no check: add its type to build", dir, gvk.ApiVersion(), gvk.Kind)
				break
			}
			var meta metav1.PartialObjectMetadata
			if err := json.Unmarshal(b, &meta); err != nil || meta.Name == "" {
				err2 = fmt.Errorf("%s: %s without a name (%v)", dir, what, err)
			}
			out.custom = append(out.custom, meta)
		}
		if err2 != nil {
			t.Error(err2)
		}
	}
	return out
}

// decode unmarshals b into a T, rejecting fields T does not have.
func decode[T any](t *testing.T, what string, b []byte) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Errorf("%s does not decode strictly: %v", what, err)
	}
	return v
}

// workload is the pod template of a StatefulSet or Deployment, with what checks need.
type workload struct {
	kind, name string
	program    string // coordinator or worker: the binary its container runs
	selector   *metav1.LabelSelector
	pod        corev1.PodTemplateSpec
}

func (o *objects) workloads() []workload {
	var ws []workload
	for _, s := range o.statefulSets {
		ws = append(ws, workload{"StatefulSet", s.Name, "", s.Spec.Selector, s.Spec.Template})
	}
	for _, d := range o.deployments {
		ws = append(ws, workload{"Deployment", d.Name, "", d.Spec.Selector, d.Spec.Template})
	}
	for i := range ws {
		for _, c := range ws[i].pod.Spec.Containers {
			for _, p := range []string{"coordinator", "worker"} {
				if strings.Contains(c.Image, "/"+p) {
					ws[i].program = p
				}
			}
		}
	}
	return ws
}

// containerPort returns the port number of the named or numbered port p of the pod.
func containerPort(pod corev1.PodSpec, p intstr.IntOrString) (int32, bool) {
	for _, c := range pod.Containers {
		for _, cp := range c.Ports {
			if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
				return cp.ContainerPort, true
			}
		}
	}
	return 0, false
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expandArgs replaces $(VAR) in c's arguments as the kubelet does, with env values: literal
// values, ConfigMap keys (which must exist), and stand-ins for the downward API.
func (o *objects) expandArgs(t *testing.T, w workload, c corev1.Container) []string {
	t.Helper()
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil:
			env[e.Name] = map[string]string{
				"metadata.name": w.name + "-0", "metadata.namespace": "default", "status.podIP": "10.1.2.3",
			}[e.ValueFrom.FieldRef.FieldPath]
			if env[e.Name] == "" {
				t.Errorf("%s %s: env %s: unexpected field %s", w.kind, w.name, e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
		case e.ValueFrom.ResourceFieldRef != nil:
			env[e.Name] = "2"
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			v, ok := o.configMapValue(ref.Name, ref.Key)
			if !ok {
				t.Errorf("%s %s: env %s: ConfigMap %s has no key %s", w.kind, w.name, e.Name, ref.Name, ref.Key)
			}
			env[e.Name] = v
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			if !o.secretHas(ref.Name, ref.Key) {
				t.Errorf("%s %s: env %s: Secret %s has no key %s", w.kind, w.name, e.Name, ref.Name, ref.Key)
			}
			env[e.Name] = "secret"
		}
	}
	var out []string
	for _, a := range c.Args {
		out = append(out, varRef.ReplaceAllStringFunc(a, func(m string) string {
			name := varRef.FindStringSubmatch(m)[1]
			v, ok := env[name]
			if !ok {
				t.Errorf("%s %s: argument %q uses $(%s), which the container's env does not define", w.kind, w.name, a, name)
			}
			return v
		}))
	}
	return out
}

func (o *objects) configMapValue(name, key string) (string, bool) {
	for _, cm := range o.configMaps {
		if cm.Name == name {
			v, ok := cm.Data[key]
			return v, ok
		}
	}
	return "", false
}

func (o *objects) secretHas(name, key string) bool {
	for _, s := range o.secrets {
		if s.Name == name {
			_, ok1 := s.Data[key]
			_, ok2 := s.StringData[key]
			return ok1 || ok2
		}
	}
	return false
}

// serveFlags parses a serve container's expanded arguments with the binary's own flags.
func serveFlags(t *testing.T, w workload, args []string) *pflag.FlagSet {
	t.Helper()
	fs, err := cli.ServeFlags(w.program)
	if err != nil {
		t.Fatal(err)
	}
	if len(args) == 0 || args[0] != "serve" {
		t.Fatalf("%s %s: arguments %q do not start with serve", w.kind, w.name, args)
	}
	if err := fs.Parse(args[1:]); err != nil {
		t.Fatalf("%s %s: `%s %s` is rejected by the binary's flags: %v", w.kind, w.name, w.program, strings.Join(args, " "), err)
	}
	return fs
}

// flagPort returns the port of a host:port flag, and of its default.
func flagPort(t *testing.T, fs *pflag.FlagSet, name string) (set, def int32) {
	t.Helper()
	f := fs.Lookup(name)
	if f == nil {
		t.Fatalf("the binary has no --%s", name)
	}
	port := func(addr string) int32 {
		if addr == "" {
			return 0
		}
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatalf("--%s %q: %v", name, addr, err)
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			t.Fatalf("--%s %q: %v", name, addr, err)
		}
		return int32(n)
	}
	return port(f.Value.String()), port(f.DefValue)
}

// portsOpened checks that each named container port is the port the binary opens for the
// given flag, and that the ports the binary has defaults for keep them (so that clients'
// and workers' defaults keep working).
func portsOpened(t *testing.T, w workload, fs *pflag.FlagSet, byName map[string]string) {
	t.Helper()
	for portName, flag := range byName {
		want, def := flagPort(t, fs, flag)
		got, ok := containerPort(w.pod.Spec, intstr.FromString(portName))
		switch {
		case !ok:
			t.Errorf("%s %s: no container port %q for --%s", w.kind, w.name, portName, flag)
		case want == 0:
			t.Errorf("%s %s: --%s is not set, so nothing listens on port %q", w.kind, w.name, flag, portName)
		case got != want:
			t.Errorf("%s %s: port %q is %d but --%s opens %d", w.kind, w.name, portName, got, flag, want)
		case def != 0 && got != def:
			t.Errorf("%s %s: port %q is %d, not the binary's default %d for --%s", w.kind, w.name, portName, got, def, flag)
		}
	}
}

// mountedFile checks that path is a key of a Secret volume mounted in the container.
func (o *objects) mountedFile(t *testing.T, w workload, c corev1.Container, flag, path string) {
	t.Helper()
	for _, m := range c.VolumeMounts {
		dir := strings.TrimSuffix(m.MountPath, "/") + "/"
		if !strings.HasPrefix(path, dir) {
			continue
		}
		key := strings.TrimPrefix(path, dir)
		for _, v := range w.pod.Spec.Volumes {
			if v.Name != m.Name {
				continue
			}
			switch {
			case v.Secret != nil:
				if !o.secretHas(v.Secret.SecretName, key) {
					t.Errorf("%s %s: --%s %s: Secret %s has no key %s", w.kind, w.name, flag, path, v.Secret.SecretName, key)
				}
				return
			case v.CSI != nil && v.CSI.Driver == "csi.cert-manager.io":
				if !slices.Contains([]string{"tls.crt", "tls.key", "ca.crt"}, key) {
					t.Errorf("%s %s: --%s %s: cert-manager's CSI volume has no %s", w.kind, w.name, flag, path, key)
				}
				return
			}
		}
		t.Errorf("%s %s: --%s %s: volume %s is neither a Secret nor a cert-manager CSI volume", w.kind, w.name, flag, path, m.Name)
		return
	}
	t.Errorf("%s %s: --%s %s is on no mounted volume", w.kind, w.name, flag, path)
}

// mountedFiles checks that every --*-file flag set (tokens, the raft secret) names a file
// of a mounted Secret, and that the required ones are set.
func (o *objects) mountedFiles(t *testing.T, w workload, c corev1.Container, fs *pflag.FlagSet, required ...string) {
	t.Helper()
	fs.Visit(func(f *pflag.Flag) {
		if strings.HasSuffix(f.Name, "-file") {
			o.mountedFile(t, w, c, f.Name, f.Value.String())
		}
	})
	for _, name := range required {
		if !fs.Changed(name) {
			t.Errorf("%s %s: --%s is not set", w.kind, w.name, name)
		}
	}
}

// selects reports whether the selector sel matches the labels of pod template p.
func selects(t *testing.T, sel *metav1.LabelSelector, p map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	return !s.Empty() && s.Matches(labels.Set(p))
}

// checkWiring checks what holds in the base and in every overlay.
func checkWiring(t *testing.T, o *objects, tls bool) {
	ws := o.workloads()
	if len(o.statefulSets) != 1 || len(o.deployments) != 1 {
		t.Fatalf("want one coordinator StatefulSet and one worker Deployment, got %d and %d", len(o.statefulSets), len(o.deployments))
	}
	sts, dep := o.statefulSets[0], o.deployments[0]
	byName := map[string]workload{}
	for _, w := range ws {
		byName[w.kind] = w
		if w.program == "" {
			t.Fatalf("%s %s runs neither the coordinator nor the worker image", w.kind, w.name)
		}
		if !selects(t, w.selector, w.pod.Labels) {
			t.Errorf("%s %s: selector %v does not match its pod labels %v", w.kind, w.name, w.selector, w.pod.Labels)
		}
		// Pods of the two workloads must not be confused by any selector.
		for _, v := range ws {
			if v.name != w.name && selects(t, w.selector, v.pod.Labels) {
				t.Errorf("%s %s's selector also matches %s %s's pods", w.kind, w.name, v.kind, v.name)
			}
		}
		sc := w.pod.Spec.SecurityContext
		if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 65532 {
			t.Errorf("%s %s: not run as the image's non-root user 65532", w.kind, w.name)
		}
		for _, c := range w.pod.Spec.Containers {
			if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
				t.Errorf("%s %s: container %s has a writable root filesystem", w.kind, w.name, c.Name)
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
				t.Errorf("%s %s: container %s lacks CPU and memory requests", w.kind, w.name, c.Name)
			}
			// Probes: HTTP on the metrics port, liveness /healthz, readiness /readyz.
			for _, p := range []struct {
				kind, path string
				probe      *corev1.Probe
			}{{"liveness", "/healthz", c.LivenessProbe}, {"readiness", "/readyz", c.ReadinessProbe}, {"startup", "/healthz", c.StartupProbe}} {
				if p.probe == nil {
					if p.kind != "startup" {
						t.Errorf("%s %s: no %s probe", w.kind, w.name, p.kind)
					}
					continue
				}
				g := p.probe.HTTPGet
				if g == nil || g.Path != p.path || g.Port != intstr.FromString("metrics") {
					t.Errorf("%s %s: %s probe %+v, want GET %s on the metrics port", w.kind, w.name, p.kind, p.probe.ProbeHandler, p.path)
				}
			}
		}
		for _, v := range w.pod.Spec.Volumes {
			if v.Secret != nil && !slices.ContainsFunc(o.secrets, func(s corev1.Secret) bool { return s.Name == v.Secret.SecretName }) {
				t.Errorf("%s %s: volume %s refers to a Secret %s that the kustomization does not make", w.kind, w.name, v.Name, v.Secret.SecretName)
			}
			if v.Secret != nil && v.Secret.DefaultMode != nil && *v.Secret.DefaultMode&0o040 == 0 {
				t.Errorf("%s %s: Secret volume %s mode %o is unreadable by the non-root user (group fsGroup)", w.kind, w.name, v.Name, *v.Secret.DefaultMode)
			}
		}
	}

	// The coordinators: flags the binary accepts, ports it opens, peer addresses through
	// the headless Service.
	cw := byName["StatefulSet"]
	cc := cw.pod.Spec.Containers[0]
	cf := serveFlags(t, cw, o.expandArgs(t, cw, cc))
	portsOpened(t, cw, cf, map[string]string{"raft": "raft-addr", "api": "api-addr", "metrics": "metrics-addr"})
	var peer *corev1.Service
	for i := range o.services {
		if o.services[i].Name == sts.Spec.ServiceName {
			peer = &o.services[i]
		}
	}
	switch {
	case peer == nil:
		t.Fatalf("StatefulSet %s: serviceName %s is not a Service of the kustomization", sts.Name, sts.Spec.ServiceName)
	case peer.Spec.ClusterIP != corev1.ClusterIPNone:
		t.Errorf("Service %s: the StatefulSet's peer Service must be headless", peer.Name)
	case !peer.Spec.PublishNotReadyAddresses:
		t.Errorf("Service %s: must publish not-ready addresses, or members cannot reach each other to elect a leader", peer.Name)
	}
	apiPort, _ := containerPort(cw.pod.Spec, intstr.FromString("api"))
	raftPort, _ := containerPort(cw.pod.Spec, intstr.FromString("raft"))
	pod0 := sts.Name + "-0"
	wantAdvertise := map[string]string{
		"raft-advertise": fmt.Sprintf("%s.%s:%d", pod0, sts.Spec.ServiceName, raftPort),
		"api-advertise":  fmt.Sprintf("%s.%s:%d", pod0, sts.Spec.ServiceName, apiPort),
		"id":             pod0,
		"bootstrap-id":   pod0,
		"data-dir":       "/data",
	}
	for flag, want := range wantAdvertise {
		if got := cf.Lookup(flag).Value.String(); got != want {
			t.Errorf("StatefulSet %s: pod 0 gets --%s %q, want %q", sts.Name, flag, got, want)
		}
	}
	if !slices.ContainsFunc(cc.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/data" }) ||
		!slices.ContainsFunc(sts.Spec.VolumeClaimTemplates, func(p corev1.PersistentVolumeClaim) bool {
			return slices.ContainsFunc(cc.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == p.Name && m.MountPath == "/data" })
		}) {
		t.Errorf("StatefulSet %s: /data is not a volume claim template: members would lose their raft state", sts.Name)
	}
	var wantJoin []string
	for i := range int(*sts.Spec.Replicas) {
		wantJoin = append(wantJoin, fmt.Sprintf("%s-%d.%s:%d", sts.Name, i, sts.Spec.ServiceName, apiPort))
	}
	if got, _ := cf.GetStringSlice("join"); !slices.Equal(got, wantJoin) {
		t.Errorf("StatefulSet %s: --join %v, want every member's API address %v", sts.Name, got, wantJoin)
	}
	o.mountedFiles(t, cw, cc, cf, "token-file", "join-token-file")

	// The workers: flags, ports, the coordinators to join.
	ww := byName["Deployment"]
	wc := ww.pod.Spec.Containers[0]
	wf := serveFlags(t, ww, o.expandArgs(t, ww, wc))
	portsOpened(t, ww, wf, map[string]string{"grpc": "listen", "metrics": "metrics-addr"})
	if got, _ := wf.GetStringSlice("join"); !slices.Equal(got, wantJoin) {
		t.Errorf("Deployment %s: --join %v, want the coordinators' API addresses %v", dep.Name, got, wantJoin)
	}
	if adv := wf.Lookup("advertise").Value.String(); !strings.HasPrefix(adv, "10.1.2.3:") {
		t.Errorf("Deployment %s: --advertise %q, want the pod IP", dep.Name, adv)
	}
	o.mountedFiles(t, ww, wc, wf, "join-token-file")
	if g := ww.pod.Spec.TerminationGracePeriodSeconds; g == nil {
		t.Errorf("Deployment %s: no terminationGracePeriodSeconds", dep.Name)
	} else if d, _ := wf.GetDuration("drain-timeout"); d.Seconds() >= float64(*g) {
		t.Errorf("Deployment %s: --drain-timeout %s is not below terminationGracePeriodSeconds %d", dep.Name, d, *g)
	}
	for _, prog := range []struct {
		w     workload
		flags *pflag.FlagSet
	}{{cw, cf}, {ww, wf}} {
		isSet := false
		for _, f := range []string{"tls-cert", "tls-key", "tls-ca"} {
			v := prog.flags.Lookup(f).Value.String()
			isSet = isSet || v != ""
			if tls && v == "" {
				t.Errorf("%s %s: TLS overlay without --%s", prog.w.kind, prog.w.name, f)
			}
			if v != "" {
				o.mountedFile(t, prog.w, prog.w.pod.Spec.Containers[0], f, v)
			}
		}
		if !tls && isSet {
			t.Errorf("%s %s: TLS flags in the base", prog.w.kind, prog.w.name)
		}
	}

	// Services select pods of one workload and target ports those pods open.
	for _, s := range o.services {
		var target *workload
		for i := range ws {
			if selects(t, &metav1.LabelSelector{MatchLabels: s.Spec.Selector}, ws[i].pod.Labels) {
				if target != nil {
					t.Errorf("Service %s selects the pods of both %s and %s", s.Name, target.name, ws[i].name)
				}
				target = &ws[i]
			}
		}
		if target == nil {
			t.Errorf("Service %s selects no pods", s.Name)
			continue
		}
		for _, p := range s.Spec.Ports {
			if _, ok := containerPort(target.pod.Spec, p.TargetPort); !ok {
				t.Errorf("Service %s: port %s targets %s, which %s %s does not open", s.Name, p.Name, p.TargetPort.String(), target.kind, target.name)
			}
		}
	}

	// The HPA scales the worker Deployment; the PDB keeps a raft quorum.
	if len(o.hpas) != 1 {
		t.Fatalf("want one HorizontalPodAutoscaler, got %d", len(o.hpas))
	}
	ref := o.hpas[0].Spec.ScaleTargetRef
	if ref.Kind != "Deployment" || ref.Name != dep.Name || ref.APIVersion != "apps/v1" {
		t.Errorf("HPA %s targets %s %s (%s), want Deployment %s", o.hpas[0].Name, ref.Kind, ref.Name, ref.APIVersion, dep.Name)
	}
	for _, m := range o.hpas[0].Spec.Metrics {
		if m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource.Name == corev1.ResourceCPU && wc.Resources.Requests.Cpu().IsZero() {
			t.Errorf("HPA on CPU utilisation, but the workers request no CPU")
		}
	}
	if len(o.pdbs) != 1 {
		t.Fatalf("want one PodDisruptionBudget, got %d", len(o.pdbs))
	}
	pdb := o.pdbs[0]
	if !selects(t, pdb.Spec.Selector, cw.pod.Labels) || pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != int(*sts.Spec.Replicas)/2+1 {
		t.Errorf("PDB %s: must select the coordinators with minAvailable a quorum (%d of %d)", pdb.Name, int(*sts.Spec.Replicas)/2+1, *sts.Spec.Replicas)
	}

	// NetworkPolicies name ports the selected pods open.
	for _, np := range o.netpols {
		var target *workload
		for i := range ws {
			if selects(t, &np.Spec.PodSelector, ws[i].pod.Labels) {
				target = &ws[i]
			}
		}
		if target == nil {
			t.Errorf("NetworkPolicy %s selects no pods", np.Name)
			continue
		}
		for _, in := range np.Spec.Ingress {
			for _, p := range in.Ports {
				if p.Port == nil {
					continue
				}
				if _, ok := containerPort(target.pod.Spec, *p.Port); !ok {
					t.Errorf("NetworkPolicy %s: port %s is not a port of %s %s", np.Name, p.Port.String(), target.kind, target.name)
				}
			}
		}
	}
	// Workers reach the coordinators' API and coordinators the workers' gRPC port.
	allowed := func(np networkingv1.NetworkPolicy, from map[string]string, port string) bool {
		for _, in := range np.Spec.Ingress {
			portOK := len(in.Ports) == 0 || slices.ContainsFunc(in.Ports, func(p networkingv1.NetworkPolicyPort) bool {
				return p.Port != nil && p.Port.String() == port
			})
			fromOK := len(in.From) == 0 || slices.ContainsFunc(in.From, func(f networkingv1.NetworkPolicyPeer) bool {
				return f.PodSelector != nil && selects(t, f.PodSelector, from)
			})
			if portOK && fromOK {
				return true
			}
		}
		return false
	}
	for _, np := range o.netpols {
		switch {
		case selects(t, &np.Spec.PodSelector, cw.pod.Labels):
			for _, c := range []struct {
				from map[string]string
				port string
			}{{ww.pod.Labels, "api"}, {cw.pod.Labels, "raft"}, {cw.pod.Labels, "api"}, {map[string]string{"gpreduce.io/client": "true"}, "api"}} {
				if !allowed(np, c.from, c.port) {
					t.Errorf("NetworkPolicy %s: pods labelled %v cannot reach the coordinators' %s port", np.Name, c.from, c.port)
				}
			}
			if allowed(np, ww.pod.Labels, "raft") {
				t.Errorf("NetworkPolicy %s: workers can reach the raft port", np.Name)
			}
		case selects(t, &np.Spec.PodSelector, ww.pod.Labels):
			if !allowed(np, cw.pod.Labels, "grpc") {
				t.Errorf("NetworkPolicy %s: coordinators cannot reach the workers", np.Name)
			}
		}
	}
}

// TestBase builds deploy/k8s and checks it.
func TestBase(t *testing.T) {
	o := build(t, ".")
	checkWiring(t, o, false)
	if len(o.custom) != 0 {
		t.Errorf("the base needs no CRDs, but has %v", o.custom)
	}
	if len(o.netpols) != 2 {
		t.Errorf("want a NetworkPolicy for the coordinators and one for the workers, got %d", len(o.netpols))
	}
}

// TestTLSOverlay builds deploy/k8s/overlays/tls and checks it: the base's wiring plus TLS
// flags whose files come from cert-manager's CSI volumes, whose issuer the overlay makes.
func TestTLSOverlay(t *testing.T) {
	o := build(t, filepath.Join("overlays", "tls"))
	checkWiring(t, o, true)
	issuers := map[string]bool{}
	for _, c := range o.custom {
		if c.Kind == "Issuer" {
			issuers[c.Name] = true
		}
	}
	for _, w := range o.workloads() {
		for _, v := range w.pod.Spec.Volumes {
			if v.CSI == nil {
				continue
			}
			if name := v.CSI.VolumeAttributes["csi.cert-manager.io/issuer-name"]; !issuers[name] {
				t.Errorf("%s %s: CSI volume %s asks Issuer %q, which the overlay does not make", w.kind, w.name, v.Name, name)
			}
		}
	}
}
