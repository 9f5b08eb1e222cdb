package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// process is one started component.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

// start runs a component in its own process group, killed with the test
// binary (Pdeathsig), its output in logs/NAME.log.
func (n *Node) start(name string, path string, args []string, env []string) (*process, error) {
	logf, err := os.Create(filepath.Join(n.dir, "logs", name+".log"))
	if err != nil {
		return nil, fmt.Errorf("node %s: %s log: %w", n.Name, name, err)
	}
	cmd := exec.Command(path, args...)
	var w io.Writer = logf
	if n.out != nil {
		w = io.MultiWriter(logf, n.out)
	}
	cmd.Stdout, cmd.Stderr = w, w
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("node %s: start %s: %w", n.Name, name, err)
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{}), log: logf}
	go func() { _ = cmd.Wait(); close(p.done) }()
	n.procs = append(n.procs, p)
	return p, nil
}

// stop ends p: SIGTERM to its group, SIGKILL after grace.
func (p *process) stop(grace time.Duration) {
	select {
	case <-p.done:
	default:
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
	_ = p.log.Close()
}

// exited reports an error when p has exited, naming its log.
func (n *Node) exited(p *process) error {
	select {
	case <-p.done:
		return fmt.Errorf("node %s: %s exited (%v); its log ends:\n%s", n.Name, p.name, p.cmd.ProcessState, n.LogTail(p.name, 30))
	default:
		return nil
	}
}

// waitFor polls cond every 200ms until it is true, p exits, or timeout.
func (n *Node) waitFor(ctx context.Context, p *process, what string, timeout time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		last = err
		if p != nil {
			if err := n.exited(p); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			msg := fmt.Sprintf("node %s: %s: not within %v", n.Name, what, timeout)
			if last != nil {
				msg += fmt.Sprintf(" (last: %v)", last)
			}
			if p != nil {
				msg += fmt.Sprintf("; %s's log ends:\n%s", p.name, n.LogTail(p.name, 30))
			}
			return errors.New(msg)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
