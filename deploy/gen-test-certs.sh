#!/usr/bin/env bash
# Makes TEST material for a decree controller in DIR (default ./secrets):
# a self-signed CA (ca.crt, ca.key), the controller's certificate signed by
# it (controller.crt, controller.key) valid for the names given after DIR
# (default: controller, decree-controller, localhost, 127.0.0.1 — the
# compose service, the Kubernetes Service and the local machine), a client
# certificate for mutual TLS (client.crt, client.key), and two random tokens
# (client.token, worker.token), and a token for the metrics listener
# (metrics.token). Keys and tokens are mode 0600.
#
# For production use certificates from your own CA or ACME; see README.md.
#
#   ./gen-test-certs.sh [DIR [NAME|IP ...]]
set -euo pipefail
dir=${1:-secrets}
shift || true
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(controller decree-controller localhost 127.0.0.1)
san=""
for n in "${names[@]}"; do
  if [[ $n =~ ^[0-9.]+$ || $n == *:* ]]; then san+="IP:$n,"; else san+="DNS:$n,"; fi
done
san=${san%,}
mkdir -p "$dir"
cd "$dir"
umask 077
days=365
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
  -keyout ca.key -out ca.crt -days "$days" -subj "/CN=decree test CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
  -keyout controller.key -out controller.csr -subj "/CN=${names[0]}" 2>/dev/null
openssl x509 -req -in controller.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
  -out controller.crt -days "$days" \
  -extfile <(printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\n' "$san") 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
  -keyout client.key -out client.csr -subj "/CN=decree client" 2>/dev/null
openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
  -out client.crt -days "$days" \
  -extfile <(printf 'extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\n') 2>/dev/null
rm -f controller.csr client.csr ca.srl
openssl rand -hex 32 > client.token
openssl rand -hex 32 > worker.token
openssl rand -hex 32 > metrics.token
chmod 600 ./*.key ./*.token
chmod 644 ./*.crt
echo "wrote $(pwd): ca.crt ca.key controller.crt controller.key client.crt client.key client.token worker.token metrics.token" >&2
echo "controller certificate names: $san" >&2
