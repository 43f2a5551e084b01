package check

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// chartDir is the chart under test.
const chartDir = "../taskgate"

// helmBinary is $HELM, else helm on PATH. Without either the tests skip
// (scripts/test.sh builds helm and sets HELM, so CI never skips).
func helmBinary(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	if h, err := exec.LookPath("helm"); err == nil {
		return h
	}
	t.Skip("no helm: set HELM or put helm on PATH (scripts/test.sh builds it from helm.sh/helm/v4)")
	return ""
}

// helm runs the helm binary with args; it returns stdout, and the error
// with stderr in it.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBinary(t), args...)
	// A clean home: no repositories, plugins or caches of the machine's.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// render runs `helm template` of chart with the values YAML (none when
// ""), the release "taskgate" in namespace "tg".
func render(t *testing.T, chart, values string) (string, error) {
	t.Helper()
	args := []string{"template", "taskgate", chart, "--namespace", "tg"}
	if values != "" {
		f := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(f, []byte(values), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--values", f)
	}
	return helm(t, args...)
}

// doc is one rendered document: the template it came from and its YAML.
type doc struct {
	source string // e.g. "taskgate/templates/deployment.yaml"
	yaml   []byte
}

var sourceLine = regexp.MustCompile(`^# Source: (\S+)$`)

// split cuts helm's output into documents, skipping empty ones.
func split(out string) []doc {
	var docs []doc
	for _, part := range regexp.MustCompile(`(?m)^---\s*$`).Split(out, -1) {
		d := doc{}
		var body []string
		for _, line := range strings.Split(part, "\n") {
			if m := sourceLine.FindStringSubmatch(line); m != nil && d.source == "" {
				d.source = m[1]
				continue
			}
			body = append(body, line)
		}
		text := strings.TrimSpace(strings.Join(body, "\n"))
		if text == "" || strings.Trim(regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(text, ""), " \n") == "" {
			continue
		}
		d.yaml = []byte(text + "\n")
		docs = append(docs, d)
	}
	return docs
}

// objects are the decoded objects of one render, by kind then name.
type objects struct {
	deployments map[string]*appsv1.Deployment
	services    map[string]*corev1.Service
	configMaps  map[string]*corev1.ConfigMap
	accounts    map[string]*corev1.ServiceAccount
	pdbs        map[string]*policyv1.PodDisruptionBudget
	hpas        map[string]*autoscalingv2.HorizontalPodAutoscaler
	netpols     map[string]*networkingv1.NetworkPolicy
	monitors    map[string]*serviceMonitor
	rules       map[string]*prometheusRule
	count       int
}

// kinds maps each kind the chart may render to its Go type: a document
// of another kind is an error (a new template needs a type here).
var kinds = map[string]func(o *objects, name string) any{
	"apps/v1/Deployment": func(o *objects, name string) any {
		v := &appsv1.Deployment{}
		o.deployments[name] = v
		return v
	},
	"v1/Service": func(o *objects, name string) any { v := &corev1.Service{}; o.services[name] = v; return v },
	"v1/ConfigMap": func(o *objects, name string) any {
		v := &corev1.ConfigMap{}
		o.configMaps[name] = v
		return v
	},
	"v1/ServiceAccount": func(o *objects, name string) any {
		v := &corev1.ServiceAccount{}
		o.accounts[name] = v
		return v
	},
	"policy/v1/PodDisruptionBudget": func(o *objects, name string) any {
		v := &policyv1.PodDisruptionBudget{}
		o.pdbs[name] = v
		return v
	},
	"autoscaling/v2/HorizontalPodAutoscaler": func(o *objects, name string) any {
		v := &autoscalingv2.HorizontalPodAutoscaler{}
		o.hpas[name] = v
		return v
	},
	"networking.k8s.io/v1/NetworkPolicy": func(o *objects, name string) any {
		v := &networkingv1.NetworkPolicy{}
		o.netpols[name] = v
		return v
	},
	"monitoring.coreos.com/v1/ServiceMonitor": func(o *objects, name string) any {
		v := &serviceMonitor{}
		o.monitors[name] = v
		return v
	},
	"monitoring.coreos.com/v1/PrometheusRule": func(o *objects, name string) any {
		v := &prometheusRule{}
		o.rules[name] = v
		return v
	},
}

// decode decodes every document strictly into its type: a field the type
// does not have (a typo), a duplicate field, or a value of the wrong type
// is an error naming the template.
func decode(docs []doc) (*objects, error) {
	o := &objects{
		deployments: map[string]*appsv1.Deployment{}, services: map[string]*corev1.Service{},
		configMaps: map[string]*corev1.ConfigMap{}, accounts: map[string]*corev1.ServiceAccount{},
		pdbs: map[string]*policyv1.PodDisruptionBudget{}, hpas: map[string]*autoscalingv2.HorizontalPodAutoscaler{},
		netpols: map[string]*networkingv1.NetworkPolicy{}, monitors: map[string]*serviceMonitor{},
		rules: map[string]*prometheusRule{},
	}
	for _, d := range docs {
		if err := decodeOne(o, d); err != nil {
			return nil, err
		}
	}
	return o, nil
}

func decodeOne(o *objects, d doc) error {
	var head struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(d.yaml, &head); err != nil {
		return fmt.Errorf("%s: %v", d.source, err)
	}
	key := head.APIVersion + "/" + head.Kind
	newObj, ok := kinds[key]
	if !ok {
		return fmt.Errorf("%s: kind %s is not one the chart may render (add its type to kinds)", d.source, key)
	}
	if head.Metadata.Name == "" {
		return fmt.Errorf("%s: %s without metadata.name", d.source, key)
	}
	obj := newObj(o, head.Metadata.Name)
	if err := strictUnmarshal(d.yaml, obj); err != nil {
		return fmt.Errorf("%s: %s %s: %v", d.source, head.Kind, head.Metadata.Name, err)
	}
	o.count++
	return nil
}

// strictUnmarshal decodes YAML into v as the API server's strict field
// validation does: YAML to JSON refusing duplicate keys, then JSON with
// case-sensitive field names (encoding/json would take "targetport" for
// targetPort) refusing unknown and duplicate fields.
func strictUnmarshal(data []byte, v any) error {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return err
	}
	strict, err := kjson.UnmarshalStrict(js, v, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}
