#!/bin/sh
# Create the secret files deploy/docker-compose.yml hands to its containers, once:
#   pkcs11_pin         SoftHSM user PIN           (init, keymanager-1, keymanager-2)
#   pkcs11_so_pin      SoftHSM security-officer PIN (init only)
#   postgres_password  PostgreSQL password of the role keymanager (postgres)
#   pgpass             the same password in libpq's pgpass format (init and replicas)
# Existing files are kept (rerunning never changes a PIN the token was created with).
# Values are 48 hexadecimal digits from /dev/urandom: no character that pgpass would need
# to escape, and within SoftHSM's PIN length limits (4 to 255).
set -eu
cd "$(dirname "$0")"
umask 077

random_hex() {
    od -An -N24 -tx1 /dev/urandom | tr -d ' \n'
}

created=""
for name in pkcs11_pin pkcs11_so_pin postgres_password; do
    if [ ! -s "$name" ]; then
        random_hex > "$name"
        created="$created $name"
    fi
done
if [ ! -s pgpass ]; then
    printf 'postgres:5432:keymanager:keymanager:%s\n' "$(cat postgres_password)" > pgpass
    created="$created pgpass"
fi

# The keymanager containers run as uid 10001 and read pkcs11_pin, pkcs11_so_pin and pgpass
# through bind mounts, which keep the host's owner and mode. libpq ignores a pgpass file
# that group or others may read, so the files are owner-only and owned by uid 10001.
# postgres_password is read by the postgres image's entrypoint as root: any owner works.
for name in $created; do
    chmod 0400 "$name"
    echo "created deploy/secrets/$name"
done
if [ "$(id -u)" = 0 ]; then
    chown 10001:10001 pkcs11_pin pkcs11_so_pin pgpass
elif [ -n "$created" ]; then
    echo "now run:  sudo chown 10001:10001 $(pwd)/pkcs11_pin $(pwd)/pkcs11_so_pin $(pwd)/pgpass"
fi
