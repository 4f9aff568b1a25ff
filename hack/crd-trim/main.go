// Command crd-trim drops the descriptions of embedded Kubernetes types (the pod templates)
// from the CRDs controller-gen wrote, keeping those of our own fields. With them, a CRD passes
// the 256 KiB that client-side `kubectl apply` can store in its last-applied annotation; the
// fields of a pod template are documented by `kubectl explain pod.spec` anyway.
//
// It also joins the lines of each kept description into paragraphs: controller-gen keeps the
// line breaks of Go comments, which `kubectl explain` would print mid-sentence.
//
// Usage: crd-trim FILE...   (rewrites each file in place)
package main

import (
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"
)

// embedded names the properties whose whole subtree is an embedded Kubernetes type.
var embedded = map[string]bool{"template": true, "env": true, "resources": true}

func main() {
	for _, path := range os.Args[1:] {
		if err := trim(path); err != nil {
			fmt.Fprintf(os.Stderr, "crd-trim: %s: %v\n", path, err)
			os.Exit(1)
		}
	}
}

func trim(path string) error {
	in, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var crd map[string]any
	if err := yaml.Unmarshal(in, &crd); err != nil {
		return err
	}
	walk(crd, false)
	out, err := yaml.Marshal(crd)
	if err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte("---\n"), out...), 0o644)
}

// walk removes descriptions below an embedded property, but keeps the description of the
// property itself, which is ours.
func walk(node any, inEmbedded bool) {
	switch n := node.(type) {
	case map[string]any:
		if inEmbedded {
			delete(n, "description")
		} else if d, ok := n["description"].(string); ok {
			n["description"] = reflow(d)
		}
		for key, child := range n {
			if key == "description" {
				continue
			}
			if key == "properties" {
				props, _ := child.(map[string]any)
				for name, prop := range props {
					if embedded[name] && !inEmbedded {
						if p, ok := prop.(map[string]any); ok {
							for k, v := range p {
								if k != "description" {
									walk(v, true)
								}
							}
						}
						continue
					}
					walk(prop, inEmbedded)
				}
				continue
			}
			walk(child, inEmbedded)
		}
	case []any:
		for _, child := range n {
			walk(child, inEmbedded)
		}
	}
}

// reflow joins the lines of each paragraph of a description.
func reflow(description string) string {
	paragraphs := strings.Split(description, "\n\n")
	for i, p := range paragraphs {
		paragraphs[i] = strings.ReplaceAll(p, "\n", " ")
	}
	return strings.Join(paragraphs, "\n\n")
}
