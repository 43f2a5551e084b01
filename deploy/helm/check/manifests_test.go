package check

import (
	"flag"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite deploy/kubernetes/*.yaml from the chart")

const (
	manifestsDir   = "../../kubernetes"
	manifestValues = "../kubernetes.values.yaml"
	manifestHeader = "# Generated from the Helm chart (deploy/helm/taskgate) with\n" +
		"# deploy/helm/kubernetes.values.yaml; do not edit: change the chart and run\n" +
		"#   (cd deploy/helm/check && go test -run TestRawManifests -update)\n#\n"
)

// TestRawManifests: deploy/kubernetes holds exactly what the chart renders
// with deploy/helm/kubernetes.values.yaml, one file per template, so the
// plain manifests cannot drift from the chart. -update rewrites them.
func TestRawManifests(t *testing.T) {
	values, err := os.ReadFile(manifestValues)
	if err != nil {
		t.Fatal(err)
	}
	out, err := render(t, chartDir, string(values))
	if err != nil {
		t.Fatal(err)
	}
	docs := split(out)
	if _, err := decode(docs); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, d := range docs {
		name := path.Base(d.source)
		if want[name] != "" {
			want[name] += "---\n"
		} else {
			want[name] = manifestHeader
		}
		want[name] += string(d.yaml)
	}
	if len(want) < 6 {
		t.Fatalf("only %d manifests rendered: %v", len(want), slices.Sorted(maps.Keys(want)))
	}
	existing, _ := filepath.Glob(filepath.Join(manifestsDir, "*.yaml"))
	if *update {
		for _, f := range existing {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
		for name, content := range want {
			if err := os.WriteFile(filepath.Join(manifestsDir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	for _, f := range existing {
		if _, ok := want[filepath.Base(f)]; !ok {
			t.Errorf("%s: the chart renders no such file (run with -update to remove it)", f)
		}
	}
	for name, content := range want {
		got, err := os.ReadFile(filepath.Join(manifestsDir, name))
		if err != nil {
			t.Errorf("%s: %v (run with -update)", name, err)
			continue
		}
		if string(got) != content {
			t.Errorf("deploy/kubernetes/%s differs from the chart's render (run with -update):\n%s", name, firstDiff(string(got), content))
		}
	}
}

// firstDiff names the first line where got and want differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return "line " + strconv.Itoa(i+1) + ":\n  file:  " + gl + "\n  chart: " + wl
		}
	}
	return "(same lines)"
}
