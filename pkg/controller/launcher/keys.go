package launcher

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"

	"golang.org/x/crypto/ssh"
)

// The files of a job's SSH Secret, mounted at ssh.authMountPath in the launcher and the
// workers.
const (
	clientKeyFile      = "id_ed25519"
	clientPubFile      = "id_ed25519.pub"
	authorizedKeysFile = "authorized_keys"
	hostKeyFile        = "ssh_host_ed25519_key"
	hostPubFile        = "ssh_host_ed25519_key.pub"
	knownHostsFile     = "known_hosts"
	configFile         = "config"
)

// sshFiles makes a job's SSH material: a client key pair the launcher logs in with (its
// public key the workers' only authorized key), and a host key every worker presents, which
// the launcher's known_hosts trusts for any host, so that host keys are checked rather than
// ignored; the ssh client config, for the directory the files are mounted in, says so. The
// keys are fresh for every job and kept from have, the files as they are, once made: a change
// of the mount directory rewrites the config alone.
func sshFiles(dir string, have map[string][]byte) (map[string][]byte, error) {
	clientPriv, clientPub := have[clientKeyFile], have[clientPubFile]
	if len(clientPriv) == 0 || len(clientPub) == 0 {
		var err error
		if clientPriv, clientPub, err = keyPair("t9k-job launcher"); err != nil {
			return nil, err
		}
	}
	hostPriv, hostPub := have[hostKeyFile], have[hostPubFile]
	if len(hostPriv) == 0 || len(hostPub) == 0 {
		var err error
		if hostPriv, hostPub, err = keyPair("t9k-job worker"); err != nil {
			return nil, err
		}
	}
	config := fmt.Sprintf(`Host *
  IdentityFile %[1]s/%[2]s
  UserKnownHostsFile %[1]s/%[3]s
  StrictHostKeyChecking yes
  BatchMode yes
  LogLevel ERROR
`, dir, clientKeyFile, knownHostsFile)
	return map[string][]byte{
		clientKeyFile:      clientPriv,
		clientPubFile:      clientPub,
		authorizedKeysFile: clientPub,
		hostKeyFile:        hostPriv,
		hostPubFile:        hostPub,
		knownHostsFile:     append([]byte("* "), hostPub...),
		configFile:         []byte(config),
	}, nil
}

// keyPair makes an ed25519 key pair: the private key in OpenSSH's PEM format, the public key
// as an authorized_keys line.
func keyPair(comment string) (private, public []byte, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return nil, nil, err
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(block), ssh.MarshalAuthorizedKey(sshPub), nil
}
