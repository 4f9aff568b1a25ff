package decision

import (
	"fmt"
	"strings"
)

// Groups that start after others (Group.After; a launcher waits for its workers): their
// replicas are not created until every replica of the groups they wait for is Ready, at the
// job's start and again after a whole-job restart. Debug mode does not wait.

// holdBack keeps back the creation of replicas whose group waits for others to be Ready,
// and says what they wait for ("" when nothing waits).
func (x *decider) holdBack(all []*replica) string {
	var waiting []string
	for _, g := range x.plan.Groups {
		ready, total, blocked := 0, 0, false
		for _, r := range all {
			if contains(g.After, r.group.Type) {
				total++
				if r.view.Ready {
					ready++
				}
			}
		}
		if ready == total {
			continue
		}
		for _, r := range all {
			// A replica waits to be made, at the job's start, or after a whole-job restart
			// whose old pod is gone (a launcher restarted with its workers waits again).
			if r.group.Type == g.Type && (r.action == needsPod || r.action == finishRestart && r.pod == nil) {
				r.action, r.view = noAction, Replica{Lost: r.view.Lost, Held: true}
				r.status.UID, r.status.Phase = "", ""
				blocked = true
			}
		}
		if blocked {
			waiting = append(waiting, fmt.Sprintf("%s is created once every %s is ready: %d of %d ready", g.Type, strings.Join(g.After, " and "), ready, total))
		}
	}
	if len(waiting) == 0 {
		return ""
	}
	return "Waiting: " + strings.Join(waiting, "; ") + "."
}
