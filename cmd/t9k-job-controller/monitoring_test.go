package main

import (
	"encoding/json"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/t9k-jobs/t9k-jobs/manifests"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/metrics"
)

// The dashboard and the alert rules (manifests/monitoring/, docs/monitoring.md) name only
// series this binary serves: the test is in package main, so every metric its imports
// register is in metrics.Registry, as in the running controller.

func TestDashboardNamesOnlyServedMetrics(t *testing.T) {
	served := servedSeries(t)
	raw, err := manifests.Dashboard()
	if err != nil {
		t.Fatal(err)
	}
	var dashboard struct {
		UID        string `json:"uid"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID         int    `json:"id"`
			Type       string `json:"type"`
			Title      string `json:"title"`
			Datasource *struct {
				UID string `json:"uid"`
			} `json:"datasource"`
			GridPos struct{ X, W int } `json:"gridPos"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dashboard); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	if dashboard.UID == "" || len(dashboard.Panels) == 0 {
		t.Fatalf("dashboard.json has no uid or no panels")
	}
	// The kind variable lists the kinds from a served metric.
	labelValues := regexp.MustCompile(`^label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*),`)
	for _, v := range dashboard.Templating.List {
		if m := labelValues.FindStringSubmatch(v.Definition); m != nil && !served[m[1]] {
			t.Errorf("variable %s reads %s, which the controller does not serve", v.Name, m[1])
		}
	}
	ids := map[int]bool{}
	queries := 0
	for _, p := range dashboard.Panels {
		if ids[p.ID] {
			t.Errorf("panel %q: id %d used twice", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q is wider than the dashboard's 24 columns", p.Title)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("panel %q: want the ${datasource} variable and at least one query", p.Title)
		}
		for _, target := range p.Targets {
			queries++
			names := seriesNamed(target.Expr)
			if len(names) == 0 {
				t.Errorf("panel %q: query %q names no series", p.Title, target.Expr)
			}
			for _, name := range names {
				if !served[name] {
					t.Errorf("panel %q names %s, which the controller does not serve (query %q)", p.Title, name, target.Expr)
				}
			}
		}
	}
	t.Logf("%d panels, %d queries", len(dashboard.Panels), queries)
}

func TestAlertRulesNameOnlyServedMetrics(t *testing.T) {
	served := servedSeries(t)
	raw, err := manifests.AlertRules()
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				For         string            `json:"for"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(raw, &file); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	alerts := map[string]bool{}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if alerts[r.Alert] || !strings.HasPrefix(r.Alert, "T9kJobs") {
				t.Errorf("group %s: alert %q: want a unique name starting T9kJobs", g.Name, r.Alert)
			}
			alerts[r.Alert] = true
			if !slices.Contains([]string{"critical", "warning", "info"}, r.Labels["severity"]) {
				t.Errorf("%s: severity %q, want critical, warning or info", r.Alert, r.Labels["severity"])
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: want a summary and a description, a person reads them when paged", r.Alert)
			}
			names := seriesNamed(r.Expr)
			if len(names) == 0 {
				t.Errorf("%s: expression %q names no series", r.Alert, r.Expr)
			}
			for _, name := range names {
				if !served[name] {
					t.Errorf("%s names %s, which the controller does not serve", r.Alert, name)
				}
			}
		}
	}
	if len(alerts) == 0 {
		t.Fatal("alerts.yaml has no rules")
	}
}

// TestSeriesNamed holds the reader below to what PromQL means: label names in matchers and
// in by (...), functions, keywords, durations and strings are not series.
func TestSeriesNamed(t *testing.T) {
	for expr, want := range map[string][]string{
		`t9k_jobs`: {"t9k_jobs"},
		`sum by (kind, phase) (t9k_jobs{kind=~"$kind", phase!="by"})`:                                     {"t9k_jobs"},
		`histogram_quantile(0.99, sum by (le) (rate(a_bucket{x="rate(b)"}[$__rate_interval])))`:           {"a_bucket"},
		`sum(rate(x_total[5m])) / sum without (code) (rate(y_total[5m] offset 1h)) > 0.1 and on (kind) z`: {"x_total", "y_total", "z"},
		`absent_over_time(t9k_build_info[10m])`:                                                           {"t9k_build_info"},
		`go_gc_gomemlimit_bytes < 1e15`:                                                                   {"go_gc_gomemlimit_bytes"},
		`a * on (kind) group_left (phase) b unless bool c`:                                                {"a", "b", "c"},
		`{__name__="t9k_jobs"}`:                                                                           nil,
	} {
		if got := seriesNamed(expr); !reflect.DeepEqual(got, want) {
			t.Errorf("seriesNamed(%q) = %q, want %q", expr, got, want)
		}
	}
}

func servedSeries(t *testing.T) map[string]bool {
	t.Helper()
	served, err := metrics.SeriesNames()
	if err != nil {
		t.Fatal(err)
	}
	return served
}

// promqlToken is a PromQL token: a string, a {...} or [...] group, a number or duration, a
// name, or one other character.
var promqlToken = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|\{[^}]*\}|\[[^\]]*\]|[0-9][0-9a-zA-Z.]*|[a-zA-Z_:][a-zA-Z0-9_:]*|\S`)

var promqlName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

// keywords are PromQL's words that are not series; those in labelLists are followed by a
// parenthesized list of label names.
var (
	keywords   = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true, "bool": true, "and": true, "or": true, "unless": true, "offset": true, "atan2": true, "inf": true, "nan": true}
	labelLists = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}
)

// seriesNamed returns the series names a PromQL expression selects, in order, each once: a
// name that is not a keyword, not called as a function and not in a label list.
func seriesNamed(expr string) []string {
	tokens := promqlToken.FindAllString(expr, -1)
	var names []string
	for i := 0; i < len(tokens); i++ {
		tok := tokens[i]
		if labelLists[tok] && i+1 < len(tokens) && tokens[i+1] == "(" {
			for i < len(tokens) && tokens[i] != ")" {
				i++
			}
			continue
		}
		if keywords[tok] || !promqlName.MatchString(tok) {
			continue
		}
		if i+1 < len(tokens) && (tokens[i+1] == "(" || tokens[i+1] == "by" || tokens[i+1] == "without") {
			continue // a function, or an aggregation: sum (...), sum by (...) (...)
		}
		if !slices.Contains(names, tok) {
			names = append(names, tok)
		}
	}
	return names
}
