package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// With several pacer processes the stand-in must know which one sent a
// request: a kill ends only that process's requests. Each connection is
// traced once to its owner through Linux's /proc (the client's socket in
// /proc/net/tcp, then the process holding it among the fleet's).

// connOwner is the slot of the process that opened one connection,
// resolved at its first request.
type connOwner struct {
	once sync.Once
	slot int
}

type connOwnerKey struct{}

// withConnOwner is an http.Server ConnContext: it gives the connection an
// owner to resolve.
func withConnOwner(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, connOwnerKey{}, &connOwner{})
}

// ownerOf returns the whose function of a stand-in served with
// withConnOwner: the slot of the process (of pids, the fleet's current
// ones by slot) that holds the request's connection, -1 when none does
// (the process died before its request was looked at).
func ownerOf(pids func() []int) func(r *http.Request) int {
	return func(r *http.Request) int {
		o, _ := r.Context().Value(connOwnerKey{}).(*connOwner)
		if o == nil {
			return -1
		}
		o.once.Do(func() {
			o.slot = -1
			local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
			client, err := net.ResolveTCPAddr("tcp", r.RemoteAddr)
			server, ok := local.(*net.TCPAddr)
			if err != nil || !ok {
				return
			}
			inode, err := socketInode(client.Port, server.Port)
			if err != nil {
				return
			}
			for slot, pid := range pids() {
				if pid > 0 && holdsSocket(pid, inode) {
					o.slot = slot
					return
				}
			}
		})
		return o.slot
	}
}

// socketInode finds, in /proc/net/tcp, the inode of the loopback socket
// whose local port is port and whose peer's port is peer.
func socketInode(port, peer int) (string, error) {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return "", err
	}
	defer f.Close()
	want := fmt.Sprintf(":%04X", port)
	wantPeer := fmt.Sprintf(":%04X", peer)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || !strings.HasSuffix(fields[1], want) || !strings.HasSuffix(fields[2], wantPeer) {
			continue
		}
		return fields[9], nil
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("no socket for port %d", port)
}

// holdsSocket reports whether process pid has the socket inode open.
func holdsSocket(pid int, inode string) bool {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	want := "socket:[" + inode + "]"
	for _, e := range entries {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && l == want {
			return true
		}
	}
	return false
}
