package kubectlt9k

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned"
	"github.com/t9k-jobs/t9k-jobs/pkg/version"
)

// Options is what every command needs: the clients, the namespace ("" with
// --all-namespaces) and where to write.
type Options struct {
	REST      *rest.Config // for exec's streams
	Jobs      versioned.Interface
	Kube      kubernetes.Interface
	Namespace string
	Out       io.Writer
	ErrOut    io.Writer
	// NoWait: pause, resume, restart and scale return once the change is written, without waiting
	// for the job to show it; Timeout bounds that wait.
	NoWait  bool
	Timeout time.Duration
	// Now is the clock AGE is counted by (nil: time.Now).
	Now func() time.Time
}

// NewCommand is `kubectl t9k` with every kubectl connection flag (--kubeconfig, --context,
// -n, --as, ...) from cli-runtime.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	config := genericclioptions.NewConfigFlags(true)
	var allNamespaces, noWait bool
	var timeout time.Duration
	o := &Options{Out: streams.Out, ErrOut: streams.ErrOut}
	connect := func() error {
		var err error
		if o.REST, err = config.ToRESTConfig(); err != nil {
			return err
		}
		if o.Jobs, err = versioned.NewForConfig(o.REST); err != nil {
			return err
		}
		if o.Kube, err = kubernetes.NewForConfig(o.REST); err != nil {
			return err
		}
		if o.Namespace, _, err = config.ToRawKubeConfigLoader().Namespace(); err != nil {
			return err
		}
		if allNamespaces {
			o.Namespace = ""
		}
		o.NoWait, o.Timeout = noWait, timeout
		return nil
	}
	root := &cobra.Command{
		Use: "kubectl-t9k",
		// kubectl runs the plugin as `kubectl t9k`: help and usage say so.
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl t9k"},
		Short:       "Jobs of t9k-jobs' five kinds: list them, say why they wait or failed, read their logs, pause, resume, restart and resize them",
		Long: `kubectl t9k works on GenericJobs, MPIJobs, ColossalAIJobs, TensorFlowTrainingJobs and
XGBoostTrainingJobs alike. A job is named NAME (when one job of any kind has that name) or
KIND/NAME (genericjob/train, gj/train, mpijob/x, ...).`,
		Version:       version.Get().Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return connect()
		},
	}
	config.AddFlags(root.PersistentFlags())

	get := &cobra.Command{
		Use:   "get [JOB...]",
		Short: "List jobs of every kind in one table (-w: and their changes)",
		Example: `  kubectl t9k get
  kubectl t9k get -A
  kubectl t9k get train -w`,
		RunE: func(cmd *cobra.Command, args []string) error {
			watch, _ := cmd.Flags().GetBool("watch")
			return o.Get(cmd.Context(), args, watch)
		},
	}
	get.Flags().BoolP("watch", "w", false, "after the table, print a line for each change of a job")
	get.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "jobs of every namespace")

	why := &cobra.Command{
		Use:   "why JOB",
		Short: "Why a job waits, failed or restarted: its conditions, its replicas' last terminations, the nodes it avoids, its warnings",
		Args:  cobra.ExactArgs(1),
		RunE:  func(cmd *cobra.Command, args []string) error { return o.Why(cmd.Context(), args[0]) },
	}

	var logOpts LogOptions
	logs := &cobra.Command{
		Use:   "logs JOB",
		Short: "Every replica's log, each line prefixed with its replica (type-rank|)",
		Example: `  kubectl t9k logs train
  kubectl t9k logs train --type worker --rank 1
  kubectl t9k logs mpijob/hvd -f`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.Logs(cmd.Context(), args[0], logOpts) },
	}
	logs.Flags().StringVar(&logOpts.Type, "type", "", "only the replicas of this type")
	logs.Flags().IntVar(&logOpts.Rank, "rank", -1, "only the replica of this rank")
	logs.Flags().BoolVarP(&logOpts.Follow, "follow", "f", false, "stream the logs, new pods' too, until the job ends")
	logs.Flags().BoolVarP(&logOpts.Previous, "previous", "p", false, "the previous container of each replica's pod")
	logs.Flags().BoolVar(&logOpts.Timestamps, "timestamps", false, "keep each line's timestamp")
	logs.Flags().Int32Var(&logOpts.Attempt, "attempt", 0, "only the pods of this attempt of the job (status.attempt)")
	logs.Flags().BoolVar(&logOpts.All, "all", false, "every container of each replica, init containers too, each line prefixed type-rank/container|")

	pause := &cobra.Command{
		Use:   "pause JOB",
		Short: "Pause a job: its replicas are deleted until it is resumed (spec.runMode.pause.enabled)",
		Args:  cobra.ExactArgs(1),
		RunE:  func(cmd *cobra.Command, args []string) error { return o.SetPaused(cmd.Context(), args[0], true) },
	}
	resume := &cobra.Command{
		Use:   "resume JOB",
		Short: "Resume a paused job",
		Args:  cobra.ExactArgs(1),
		RunE:  func(cmd *cobra.Command, args []string) error { return o.SetPaused(cmd.Context(), args[0], false) },
	}
	restart := &cobra.Command{
		Use:   "restart JOB",
		Short: "Restart every replica of a job together, as its next attempt",
		Args:  cobra.ExactArgs(1),
		RunE:  func(cmd *cobra.Command, args []string) error { return o.Restart(cmd.Context(), args[0]) },
	}
	var replicas int32
	scale := &cobra.Command{
		Use:   "scale JOB --replicas N",
		Short: "Resize a GenericJob's elastic type, as kubectl scale does",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("replicas") {
				return fmt.Errorf("--replicas is required")
			}
			return o.Scale(cmd.Context(), args[0], replicas)
		},
	}
	scale.Flags().Int32Var(&replicas, "replicas", 0, "the size to run at")
	var execOpts ExecOptions
	exec := &cobra.Command{
		Use:   "exec JOB [--type T] [--rank N] [-it] -- COMMAND [ARGS...]",
		Short: "Run a command in a replica, named by its type and rank",
		Example: `  kubectl t9k exec train --type worker --rank 1 -- nvidia-smi
  kubectl t9k exec mpijob/hvd --type launcher -it -- bash`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 {
				return fmt.Errorf("name the job, then the command after --: kubectl t9k exec JOB --type T --rank N -- COMMAND")
			}
			execOpts.In = streams.In
			return o.Exec(cmd.Context(), args[0], execOpts, args[1:])
		},
	}
	exec.Flags().StringVar(&execOpts.Type, "type", "", "the replica type (needed when the job has more than one)")
	exec.Flags().IntVar(&execOpts.Rank, "rank", 0, "the replica's rank")
	exec.Flags().StringVarP(&execOpts.Container, "container", "c", "", "a container other than the replica's main one")
	exec.Flags().BoolVarP(&execOpts.Stdin, "stdin", "i", false, "pass stdin to the command")
	exec.Flags().BoolVarP(&execOpts.TTY, "tty", "t", false, "give the command a terminal")
	debug := &cobra.Command{
		Use:   "debug JOB",
		Short: "Make a copy of a job in debug mode (NAME-debug): its replicas wait to be exec'd into instead of training",
		Args:  cobra.ExactArgs(1),
		RunE:  func(cmd *cobra.Command, args []string) error { return o.Debug(cmd.Context(), args[0]) },
	}
	for _, c := range []*cobra.Command{pause, resume, restart, scale, debug} {
		c.Flags().BoolVar(&noWait, "no-wait", false, "return once the change is written, without waiting for the job to show it")
		c.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long to wait for the job to show the change")
	}
	root.AddCommand(get, why, logs, pause, resume, restart, scale, exec, debug)
	root.SetContext(context.Background())
	return root
}
