package apivalidation

import (
	"fmt"

	"github.com/t9k-jobs/t9k-jobs/examples"
)

// Object returns the object of a case: its example, edited.
func (c Case) Object() (map[string]any, error) {
	obj, err := examples.Object(c.Example)
	if err != nil {
		return nil, err
	}
	c.Edit(obj)
	return obj, nil
}

// Objects returns the old and new object of an update case.
func (c UpdateCase) Objects() (old, updated map[string]any, err error) {
	if old, err = examples.Object(c.Example); err != nil {
		return nil, nil, err
	}
	if updated, err = examples.Object(c.Example); err != nil {
		return nil, nil, err
	}
	c.Old(old)
	c.New(updated)
	return old, updated, nil
}

// set puts value at a path of map keys and list indexes, e.g.
// set(obj, 2, "spec", "replicaSpecs", 0, "replicas"), creating maps on the way.
func set(obj map[string]any, value any, path ...any) {
	var cur any = obj
	for i, p := range path {
		last := i == len(path)-1
		switch key := p.(type) {
		case string:
			m := cur.(map[string]any)
			if last {
				m[key] = value
				return
			}
			if _, ok := m[key]; !ok {
				m[key] = map[string]any{}
			}
			cur = m[key]
		case int:
			l := cur.([]any)
			if last {
				l[key] = value
				return
			}
			cur = l[key]
		default:
			panic(fmt.Sprintf("bad path element %v", p))
		}
	}
}

// get reads the value at a path of map keys and list indexes.
func get(obj map[string]any, path ...any) any {
	var cur any = obj
	for _, p := range path {
		switch key := p.(type) {
		case string:
			cur = cur.(map[string]any)[key]
		case int:
			cur = cur.([]any)[key]
		}
	}
	return cur
}

func deepCopyValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, v := range x {
			out[k] = deepCopyValue(v)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = deepCopyValue(x[i])
		}
		return out
	default:
		return v
	}
}
