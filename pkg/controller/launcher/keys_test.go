package launcher

import (
	"bytes"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// The Secret's keys fit together: the workers authorize exactly the launcher's key, and the
// launcher's known_hosts trusts exactly the workers' host key; each job gets fresh keys.
func TestKeysFitTogether(t *testing.T) {
	data, err := sshFiles("/root/.ssh", nil)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ssh.ParsePrivateKey(data[clientKeyFile])
	if err != nil {
		t.Fatalf("client key: %v", err)
	}
	host, err := ssh.ParsePrivateKey(data[hostKeyFile])
	if err != nil {
		t.Fatalf("host key: %v", err)
	}
	authorized, _, _, _, err := ssh.ParseAuthorizedKey(data[authorizedKeysFile])
	if err != nil || !bytes.Equal(authorized.Marshal(), client.PublicKey().Marshal()) {
		t.Errorf("authorized_keys does not hold the client key (%v)", err)
	}
	_, hosts, known, _, _, err := ssh.ParseKnownHosts(data[knownHostsFile])
	if err != nil || len(hosts) != 1 || hosts[0] != "*" || !bytes.Equal(known.Marshal(), host.PublicKey().Marshal()) {
		t.Errorf("known_hosts %q does not trust the host key for every host (%v)", data[knownHostsFile], err)
	}
	config := string(data[configFile])
	for _, want := range []string{"IdentityFile /root/.ssh/id_ed25519", "UserKnownHostsFile /root/.ssh/known_hosts", "StrictHostKeyChecking yes"} {
		if !strings.Contains(config, want) {
			t.Errorf("ssh config lacks %q:\n%s", want, config)
		}
	}
	again, _ := sshFiles("/root/.ssh", nil)
	if bytes.Equal(again[clientKeyFile], data[clientKeyFile]) || bytes.Equal(again[hostKeyFile], data[hostKeyFile]) {
		t.Error("two jobs got the same keys")
	}
}

// The keys are made once: the files built again from the Secret keep them, and a new mount
// directory changes the config alone.
func TestKeysKeptWhenBuiltAgain(t *testing.T) {
	data, err := sshFiles("/root/.ssh", nil)
	if err != nil {
		t.Fatal(err)
	}
	same, err := sshFiles("/root/.ssh", data)
	if err != nil {
		t.Fatal(err)
	}
	for file, content := range data {
		if !bytes.Equal(same[file], content) {
			t.Errorf("%s changed though nothing did", file)
		}
	}
	moved, err := sshFiles("/home/mpi/.ssh", data)
	if err != nil {
		t.Fatal(err)
	}
	for file, content := range data {
		if changed := !bytes.Equal(moved[file], content); changed != (file == configFile) {
			t.Errorf("%s changed: %v, want a change of the config alone", file, changed)
		}
	}
	if !strings.Contains(string(moved[configFile]), "IdentityFile /home/mpi/.ssh/id_ed25519") {
		t.Errorf("config not moved:\n%s", moved[configFile])
	}
}
