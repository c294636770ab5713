#!/usr/bin/env bash
# Makes the serving certificate the aggregator verifies: a CA and a certificate for api.pizza-system.svc, then
# copies this folder's manifests to OUT_DIR with the CA filled into the APIServices' caBundle, and writes
# 06-serving-cert-secret.yaml there (the Secret the Deployment mounts).
# Usage: make-serving-cert.sh [OUT_DIR]   (default: ./pizza-apiserver-deploy; the CA key stays in OUT_DIR/ca.key)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-pizza-apiserver-deploy}"
mkdir -p "$out"
service=api
namespace=pizza-system
dns="$service.$namespace.svc"
cd "$out"
cp "$here"/0[0-5]-*.yaml .
openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=pizza-apiserver-ca" \
  -keyout ca.key -out ca.crt 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=$dns" -keyout tls.key -out tls.csr 2>/dev/null
printf 'subjectAltName=DNS:%s,DNS:%s.%s,DNS:%s.cluster.local\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n' \
  "$dns" "$service" "$namespace" "$dns" > tls.ext
openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile tls.ext -out tls.crt 2>/dev/null
rm -f tls.csr tls.ext ca.srl
b64() { base64 -w0 < "$1"; }
cat > 06-serving-cert-secret.yaml <<YAML
apiVersion: v1
kind: Secret
metadata:
  name: pizza-apiserver-serving-cert
  namespace: $namespace
type: kubernetes.io/tls
data:
  tls.crt: $(b64 tls.crt)
  tls.key: $(b64 tls.key)
YAML
sed -i "s|caBundle: .*|caBundle: $(b64 ca.crt)|" 05-apiservice.yaml
echo "wrote $out/06-serving-cert-secret.yaml and the caBundle of $out/05-apiservice.yaml; now: kubectl apply -f $out"
