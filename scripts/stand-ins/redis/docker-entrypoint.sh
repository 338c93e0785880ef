#!/bin/sh
# Runs redis-server as the redis user in /data; like the official image, without a
# config file it answers on every interface (protected mode off): the container's
# network is the boundary.
set -eu

if [ "${1#-}" != "$1" ]; then
    set -- redis-server "$@"
fi

if [ "$1" = redis-server ] && [ "$(id -u)" = 0 ]; then
    chown -R redis:redis /data
    exec setpriv --reuid=redis --regid=redis --init-groups "$0" "$@"
fi

if [ "$1" = redis-server ]; then
    case "${2:-}" in
        *.conf) ;;
        *) shift; set -- redis-server --protected-mode no "$@" ;;
    esac
fi

exec "$@"
