package deploy

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/decreehq/decree/controller/metrics"
)

// The KEDA kinds are custom resources, not in k8s.io/api: these structs
// follow KEDA's apis/keda/v1alpha1 (scaledjob_types.go,
// triggerauthentication_types.go) for the fields a ScaledJob and a
// TriggerAuthentication may have, so a misspelled one is refused like a
// misspelled field of a built-in kind. The Job template is decoded as the
// real batch/v1 JobSpec.

type scaledJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              scaledJobSpec `json:"spec"`
}

type scaledJobSpec struct {
	JobTargetRef               *batchv1.JobSpec `json:"jobTargetRef"`
	PollingInterval            *int32           `json:"pollingInterval,omitempty"`
	SuccessfulJobsHistoryLimit *int32           `json:"successfulJobsHistoryLimit,omitempty"`
	FailedJobsHistoryLimit     *int32           `json:"failedJobsHistoryLimit,omitempty"`
	EnvSourceContainerName     string           `json:"envSourceContainerName,omitempty"`
	MinReplicaCount            *int32           `json:"minReplicaCount,omitempty"`
	MaxReplicaCount            *int32           `json:"maxReplicaCount,omitempty"`
	RolloutStrategy            string           `json:"rolloutStrategy,omitempty"`
	Rollout                    *struct {
		Strategy          string `json:"strategy,omitempty"`
		PropagationPolicy string `json:"propagationPolicy,omitempty"`
	} `json:"rollout,omitempty"`
	ScalingStrategy struct {
		Strategy                          string   `json:"strategy,omitempty"`
		CustomScalingQueueLengthDeduction *int32   `json:"customScalingQueueLengthDeduction,omitempty"`
		CustomScalingRunningJobPercentage string   `json:"customScalingRunningJobPercentage,omitempty"`
		PendingPodConditions              []string `json:"pendingPodConditions,omitempty"`
		MultipleScalersCalculation        string   `json:"multipleScalersCalculation,omitempty"`
	} `json:"scalingStrategy,omitempty"`
	Triggers []scaleTrigger `json:"triggers"`
}

type scaleTrigger struct {
	Type              string            `json:"type"`
	Name              string            `json:"name,omitempty"`
	UseCachedMetrics  bool              `json:"useCachedMetrics,omitempty"`
	Metadata          map[string]string `json:"metadata"`
	AuthenticationRef *struct {
		Name string `json:"name"`
		Kind string `json:"kind,omitempty"`
	} `json:"authenticationRef,omitempty"`
	MetricType string `json:"metricType,omitempty"`
}

type triggerAuthentication struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		SecretTargetRef []struct {
			Parameter string `json:"parameter"`
			Name      string `json:"name"`
			Key       string `json:"key"`
		} `json:"secretTargetRef,omitempty"`
	} `json:"spec"`
}

// typed is the Go type a rendered object decodes into, by apiVersion and
// kind; anything else is refused.
func typed(apiVersion, kind string) (any, error) {
	switch apiVersion + "/" + kind {
	case "v1/Service":
		return &corev1.Service{}, nil
	case "v1/Secret":
		return &corev1.Secret{}, nil
	case "v1/ConfigMap":
		return &corev1.ConfigMap{}, nil
	case "apps/v1/StatefulSet":
		return &appsv1.StatefulSet{}, nil
	case "apps/v1/Deployment":
		return &appsv1.Deployment{}, nil
	case "keda.sh/v1alpha1/ScaledJob":
		return &scaledJob{}, nil
	case "keda.sh/v1alpha1/TriggerAuthentication":
		return &triggerAuthentication{}, nil
	}
	return nil, fmt.Errorf("no Go type known for %s %s; add it to typed()", apiVersion, kind)
}

// render builds the kustomization in dir of fsys with kustomize's Go API
// (offline) and decodes every object strictly: unknown, misspelled
// (field names are case-sensitive) and duplicate fields are errors.
func render(fsys filesys.FileSystem, dir string) (map[string]any, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	out := map[string]any{}
	var errs []string
	for _, r := range rm.Resources() {
		data, err := r.MarshalJSON()
		if err != nil {
			return nil, err
		}
		obj, err := typed(r.GetApiVersion(), r.GetKind())
		if err != nil {
			return nil, err
		}
		strict, err := kjson.UnmarshalStrict(data, obj)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", r.GetKind(), r.GetName(), err)
		}
		for _, e := range strict {
			errs = append(errs, fmt.Sprintf("%s %s: %v", r.GetKind(), r.GetName(), e))
		}
		out[r.GetKind()+"/"+r.GetName()] = obj
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("strict decoding failed:\n%s", strings.Join(errs, "\n"))
	}
	return out, nil
}

// kustomizations lists the directories under k8s holding a kustomization.
func kustomizations(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir("k8s", func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "kustomization.yaml" {
			dirs = append(dirs, filepath.Dir(p))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// TestRenderKustomizations renders every kustomization under k8s/ (the
// shared base and one overlay per mode) and decodes each object strictly.
func TestRenderKustomizations(t *testing.T) {
	dirs := kustomizations(t)
	for _, want := range []string{"k8s", "k8s/base", "k8s/keda"} {
		if !slices.Contains(dirs, want) {
			t.Errorf("no kustomization in %s (found %v)", want, dirs)
		}
	}
	for _, dir := range dirs {
		t.Run(dir, func(t *testing.T) {
			objs, err := render(filesys.MakeFsOnDisk(), dir)
			if err != nil {
				t.Fatal(err)
			}
			if objs["StatefulSet/decree-controller"] == nil {
				t.Errorf("%s does not deploy the controller", dir)
			}
		})
	}
}

// TestRenderRefusesMisspelledFields: the same manifests with one field
// misspelled (in a built-in kind, in the ScaledJob, and in the Job template
// inside it) fail to render, naming the field.
func TestRenderRefusesMisspelledFields(t *testing.T) {
	tests := []struct {
		file, from, to, want string
	}{
		{"k8s/base/controller.yaml", "readinessProbe:", "readynessProbe:", "readynessProbe"},
		{"k8s/keda/scaledjob.yaml", "pollingInterval:", "pollingIntervall:", "pollingIntervall"},
		{"k8s/keda/scaledjob.yaml", "backoffLimit:", "backofflimit:", "backofflimit"},
		{"k8s/keda/scaledjob.yaml", "restartPolicy:", "restartpolicy:", "restartpolicy"},
		{"k8s/keda/triggerauthentication.yaml", "secretTargetRef:", "secretTargetRefs:", "secretTargetRefs"},
	}
	for _, tt := range tests {
		t.Run(tt.to, func(t *testing.T) {
			fsys := inMemory(t)
			data, err := fsys.ReadFile(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(data, []byte(tt.from)) {
				t.Fatalf("%s has no %q to misspell", tt.file, tt.from)
			}
			if err := fsys.WriteFile(tt.file, bytes.Replace(data, []byte(tt.from), []byte(tt.to), 1)); err != nil {
				t.Fatal(err)
			}
			dir := "k8s/keda"
			if _, err := render(fsys, dir); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("rendering with %s misspelled: %v; want an error naming it", tt.want, err)
			}
		})
	}
}

// inMemory copies k8s/ into an in-memory file system.
func inMemory(t *testing.T) filesys.FileSystem {
	t.Helper()
	fsys := filesys.MakeFsInMemory()
	err := filepath.WalkDir("k8s", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := fsys.MkdirAll(path.Dir(filepath.ToSlash(p))); err != nil {
			return err
		}
		return fsys.WriteFile(filepath.ToSlash(p), data)
	})
	if err != nil {
		t.Fatal(err)
	}
	return fsys
}

// TestKEDAScaledJob checks the KEDA mode against the controller: the
// trigger reads a metric the controller exports, from the port and path it
// serves, with the token file it reads; the Job runs one-shot workers with
// flags the worker accepts, and is never retried by Kubernetes.
func TestKEDAScaledJob(t *testing.T) {
	objs, err := render(filesys.MakeFsOnDisk(), "k8s/keda")
	if err != nil {
		t.Fatal(err)
	}
	sj, _ := objs["ScaledJob/decree-worker"].(*scaledJob)
	ta, _ := objs["TriggerAuthentication/decree-metrics"].(*triggerAuthentication)
	sts, _ := objs["StatefulSet/decree-controller"].(*appsv1.StatefulSet)
	svc, _ := objs["Service/decree-controller"].(*corev1.Service)
	if sj == nil || ta == nil || sts == nil || svc == nil {
		t.Fatalf("k8s/keda lacks the ScaledJob, TriggerAuthentication, controller or Service: %v", slices.Sorted(mapKeys(objs)))
	}
	if _, ok := objs["Deployment/decree-worker"]; ok {
		t.Error("the KEDA mode also deploys the standing worker Deployment")
	}
	job := sj.Spec.JobTargetRef
	if job == nil || job.BackoffLimit == nil || *job.BackoffLimit != 0 {
		t.Error("the ScaledJob's Jobs need backoffLimit: 0 (decree retries, not Kubernetes)")
	}
	if job != nil && job.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy %q, want Never", job.Template.Spec.RestartPolicy)
	}
	if sj.Spec.ScalingStrategy.Strategy != "accurate" {
		t.Errorf("scalingStrategy %q, want accurate", sj.Spec.ScalingStrategy.Strategy)
	}
	if len(sj.Spec.Triggers) != 1 || sj.Spec.Triggers[0].Type != "metrics-api" {
		t.Fatalf("want one metrics-api trigger, have %+v", sj.Spec.Triggers)
	}
	tr := sj.Spec.Triggers[0]
	md := tr.Metadata
	if md["format"] != "prometheus" {
		t.Errorf("trigger format %q, want prometheus", md["format"])
	}
	if md["valueLocation"] != metrics.RunnableMetric {
		t.Errorf("trigger reads %q; the controller exports the runnable work as %q", md["valueLocation"], metrics.RunnableMetric)
	}
	if md["targetValue"] != "1" {
		t.Errorf("targetValue %q: one worker per unit of runnable work wants 1", md["targetValue"])
	}
	// The URL names the Service, its metrics port and /metrics, over HTTPS.
	ctl := sts.Spec.Template.Spec.Containers[0]
	listen := flagValue(ctl.Args, "metrics-listen")
	_, port, _ := strings.Cut(listen, ":")
	var svcPort string
	for _, p := range svc.Spec.Ports {
		if p.TargetPort.String() == "metrics" {
			svcPort = fmt.Sprint(p.Port)
		}
	}
	var cport string
	for _, p := range ctl.Ports {
		if p.Name == "metrics" {
			cport = fmt.Sprint(p.ContainerPort)
		}
	}
	if want := "https://" + svc.Name + ":" + svcPort + "/metrics"; md["url"] != want || cport != port || port == "" {
		t.Errorf("trigger url %q, Service port %s, container port %s, --metrics-listen %s; want %s served by the controller", md["url"], svcPort, cport, listen, want)
	}
	// Bearer auth with the token file the controller reads.
	if md["authMode"] != "bearer" || tr.AuthenticationRef == nil || tr.AuthenticationRef.Name != ta.Name {
		t.Errorf("trigger authMode %q, authenticationRef %+v; want bearer through %s", md["authMode"], tr.AuthenticationRef, ta.Name)
	}
	tokenFile := flagValue(ctl.Args, "metrics-token-file")
	var secretName, secretKey string
	for _, m := range ctl.VolumeMounts {
		if rel, ok := strings.CutPrefix(tokenFile, m.MountPath+"/"); ok {
			for _, v := range sts.Spec.Template.Spec.Volumes {
				if v.Name == m.Name && v.Secret != nil {
					secretName, secretKey = v.Secret.SecretName, rel
				}
			}
		}
	}
	found := false
	for _, ref := range ta.Spec.SecretTargetRef {
		if ref.Parameter == "token" && ref.Name == secretName && ref.Key == secretKey {
			found = true
		}
		if _, ok := objs["Secret/"+ref.Name]; !ok {
			t.Errorf("TriggerAuthentication names Secret %s, which the mode does not define", ref.Name)
		}
	}
	if !found || secretName == "" {
		t.Errorf("the trigger's token is not the Secret key %s/%s the controller reads as --metrics-token-file %s", secretName, secretKey, tokenFile)
	}
	// One-shot workers with flags the worker accepts.
	if job != nil {
		w := job.Template.Spec.Containers[0]
		checkFlags(t, "ScaledJob worker", "decree-worker", w.Args)
		if flagValue(w.Args, "exit-after") != "1" || flagValue(w.Args, "exit-when-idle") == "" {
			t.Errorf("the ScaledJob's worker is not one-shot: %v", w.Args)
		}
	}
	checkFlags(t, "keda controller", "decree-controller", ctl.Args)
}
