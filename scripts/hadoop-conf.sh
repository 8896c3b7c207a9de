# The pseudo-distributed Hadoop's configuration files; sourced by scripts/svc-hadoop.sh, which sets
# ETC (cluster conf dir), LOCAL_ETC (local-mode conf dir), HOME_DIR, LIB, DATA, ADDR, HOST and the ports.
#
# Sizing, for a 2-core, 24 GB machine that also runs HBase, RabbitMQ and a test suite: each daemon has a
# small heap (svc-hadoop.sh), the NodeManager offers NM_MEMORY_MB / NM_VCORES, containers are 512 MB
# (AM, maps, reduces alike, heaps of 320/256 MB), so the application master and two tasks run at once.
# Python streaming tasks are children of their container: the physical/virtual memory checks are off
# (a task's Python would count against its JVM's container).

xml_conf() {  # xml_conf FILE NAME=VALUE...: a Hadoop *-site.xml
  local file="$1"; shift
  {
    echo '<?xml version="1.0"?>'
    echo "<!-- written by scripts/svc-hadoop.sh; edits are overwritten -->"
    echo '<configuration>'
    local kv
    for kv in "$@"; do
      echo "  <property><name>${kv%%=*}</name><value>${kv#*=}</value></property>"
    done
    echo '</configuration>'
  } >"$file.tmp"
  mv "$file.tmp" "$file"
}

# JDK 17: the daemons, the MR application master and tasks reflect into java.base.
OPENS="--add-opens=java.base/java.lang=ALL-UNNAMED --add-opens=java.base/java.util=ALL-UNNAMED \
--add-opens=java.base/java.io=ALL-UNNAMED --add-opens=java.base/java.net=ALL-UNNAMED \
--add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/sun.nio.ch=ALL-UNNAMED \
--add-opens=java.base/java.lang.reflect=ALL-UNNAMED --add-opens=java.base/java.util.concurrent=ALL-UNNAMED \
--add-opens=java.base/sun.net.dns=ALL-UNNAMED --add-opens=java.base/sun.net.util=ALL-UNNAMED"
TASK_JVM="-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.net.preferIPv4Stack=true $OPENS"

write_log4j() {  # write_log4j DIR: INFO on stderr (mrjob reads the client's counters from it)
  cat >"$1/log4j.properties" <<'EOF'
log4j.rootLogger=INFO,console
log4j.appender.console=org.apache.log4j.ConsoleAppender
log4j.appender.console.target=System.err
log4j.appender.console.layout=org.apache.log4j.PatternLayout
log4j.appender.console.layout.ConversionPattern=%d{yy/MM/dd HH:mm:ss} %p %c{2}: %m%n
log4j.logger.org.apache.hadoop.util.NativeCodeLoader=ERROR
log4j.logger.org.apache.hadoop.metrics2=WARN
log4j.logger.org.apache.hadoop.hdfs.StateChange=WARN
log4j.logger.org.apache.hadoop.hdfs.server.datanode.DataNode.clienttrace=WARN
log4j.logger.org.apache.hadoop.hdfs.server.namenode.FSNamesystem.audit=WARN
log4j.logger.org.apache.hadoop.yarn.server.resourcemanager.RMAuditLogger=WARN
log4j.logger.org.apache.hadoop.yarn.server.nodemanager.NMAuditLogger=WARN
log4j.logger.org.eclipse.jetty=WARN
EOF
}

write_local_conf() {  # local mode (no daemons): what svc-hadoop.sh always had, for bin/hadoop-local
  mkdir -p "$LOCAL_ETC" "$DATA/local-tmp"
  xml_conf "$LOCAL_ETC/core-site.xml" "fs.defaultFS=file:///" "hadoop.tmp.dir=$DATA/local-tmp"
  xml_conf "$LOCAL_ETC/mapred-site.xml" "mapreduce.framework.name=local" \
    "mapreduce.local.map.tasks.maximum=2" "mapreduce.local.reduce.tasks.maximum=1" "mapreduce.job.reduces=1"
  write_log4j "$LOCAL_ETC"
}

write_cluster_conf() {
  mkdir -p "$ETC" "$DATA/dfs/name" "$DATA/dfs/data" "$DATA/yarn/local" "$DATA/yarn/logs" "$DATA/tmp" "$DATA/logs"
  local cp="$ETC,$LIB/*"
  xml_conf "$ETC/core-site.xml" \
    "fs.defaultFS=hdfs://$HOST:$NN_PORT" \
    "hadoop.tmp.dir=$DATA/tmp" \
    "hadoop.http.staticuser.user=$(id -un)" \
    "ipc.client.connect.max.retries=3" \
    "ipc.client.connect.retry.interval=500"
  xml_conf "$ETC/hdfs-site.xml" \
    "dfs.replication=1" \
    "dfs.namenode.name.dir=file://$DATA/dfs/name" \
    "dfs.datanode.data.dir=file://$DATA/dfs/data" \
    "dfs.namenode.rpc-address=$HOST:$NN_PORT" \
    "dfs.namenode.rpc-bind-host=$ADDR" \
    "dfs.namenode.http-address=$HOST:$NN_HTTP_PORT" \
    "dfs.namenode.http-bind-host=$ADDR" \
    "dfs.namenode.secondary.http-address=$ADDR:0" \
    "dfs.datanode.address=$ADDR:$DN_PORT" \
    "dfs.datanode.http.address=$ADDR:$DN_HTTP_PORT" \
    "dfs.datanode.ipc.address=$ADDR:$DN_IPC_PORT" \
    "dfs.datanode.hostname=$HOST" \
    "dfs.client.use.datanode.hostname=true" \
    "dfs.datanode.use.datanode.hostname=true" \
    "dfs.namenode.datanode.registration.ip-hostname-check=false" \
    "dfs.webhdfs.enabled=true" \
    "dfs.permissions.enabled=false" \
    "dfs.namenode.safemode.extension=0" \
    "dfs.namenode.handler.count=8" \
    "dfs.datanode.handler.count=4" \
    "dfs.block.scanner.volume.bytes.per.second=0" \
    "dfs.namenode.fs-limits.min-block-size=0"
  xml_conf "$ETC/yarn-site.xml" \
    "yarn.resourcemanager.hostname=$HOST" \
    "yarn.resourcemanager.bind-host=$ADDR" \
    "yarn.resourcemanager.address=$HOST:$RM_PORT" \
    "yarn.resourcemanager.scheduler.address=$HOST:$RM_SCHED_PORT" \
    "yarn.resourcemanager.resource-tracker.address=$HOST:$RM_TRACKER_PORT" \
    "yarn.resourcemanager.admin.address=$HOST:$RM_ADMIN_PORT" \
    "yarn.resourcemanager.webapp.address=$HOST:$RM_WEB_PORT" \
    "yarn.nodemanager.hostname=$HOST" \
    "yarn.nodemanager.bind-host=$ADDR" \
    "yarn.nodemanager.address=$HOST:$NM_PORT" \
    "yarn.nodemanager.localizer.address=$HOST:$NM_LOCALIZER_PORT" \
    "yarn.nodemanager.webapp.address=$HOST:$NM_WEB_PORT" \
    "yarn.nodemanager.aux-services=mapreduce_shuffle" \
    "yarn.nodemanager.aux-services.mapreduce_shuffle.class=org.apache.hadoop.mapred.ShuffleHandler" \
    "mapreduce.shuffle.port=$SHUFFLE_PORT" \
    "yarn.nodemanager.resource.memory-mb=$NM_MEMORY_MB" \
    "yarn.nodemanager.resource.cpu-vcores=$NM_VCORES" \
    "yarn.scheduler.minimum-allocation-mb=256" \
    "yarn.scheduler.maximum-allocation-mb=$NM_MEMORY_MB" \
    "yarn.nodemanager.pmem-check-enabled=false" \
    "yarn.nodemanager.vmem-check-enabled=false" \
    "yarn.nodemanager.local-dirs=$DATA/yarn/local" \
    "yarn.nodemanager.log-dirs=$DATA/yarn/logs" \
    "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage=98" \
    "yarn.nodemanager.env-whitelist=JAVA_HOME,HADOOP_COMMON_HOME,HADOOP_HDFS_HOME,HADOOP_CONF_DIR,HADOOP_YARN_HOME,HADOOP_HOME,HADOOP_MAPRED_HOME,PATH,LANG,TZ" \
    "yarn.application.classpath=$cp" \
    "yarn.log-aggregation-enable=false" \
    "yarn.timeline-service.enabled=false" \
    "yarn.resourcemanager.max-completed-applications=200" \
    "yarn.resourcemanager.resource-tracker.client.thread-count=4" \
    "yarn.resourcemanager.scheduler.client.thread-count=4" \
    "yarn.resourcemanager.client.thread-count=4" \
    "yarn.nodemanager.container-manager.thread-count=4" \
    "yarn.nodemanager.delete.debug-delay-sec=0" \
    "yarn.resourcemanager.connect.retry-interval.ms=2000"
  # One queue; the application master may take half of the node (the default 10% would not fit one).
  xml_conf "$ETC/capacity-scheduler.xml" \
    "yarn.scheduler.capacity.root.queues=default" \
    "yarn.scheduler.capacity.root.default.capacity=100" \
    "yarn.scheduler.capacity.root.default.maximum-capacity=100" \
    "yarn.scheduler.capacity.maximum-am-resource-percent=0.5" \
    "yarn.scheduler.capacity.resource-calculator=org.apache.hadoop.yarn.util.resource.DefaultResourceCalculator"
  xml_conf "$ETC/mapred-site.xml" \
    "mapreduce.framework.name=yarn" \
    "mapreduce.application.classpath=$cp" \
    "yarn.app.mapreduce.am.env=HADOOP_MAPRED_HOME=$HOME_DIR" \
    "mapreduce.map.env=HADOOP_MAPRED_HOME=$HOME_DIR" \
    "mapreduce.reduce.env=HADOOP_MAPRED_HOME=$HOME_DIR" \
    "yarn.app.mapreduce.am.resource.mb=512" \
    "yarn.app.mapreduce.am.command-opts=-Xmx320m $TASK_JVM" \
    "mapreduce.map.memory.mb=512" \
    "mapreduce.map.java.opts=-Xmx256m $TASK_JVM" \
    "mapreduce.reduce.memory.mb=512" \
    "mapreduce.reduce.java.opts=-Xmx256m $TASK_JVM" \
    "mapreduce.task.io.sort.mb=32" \
    "mapreduce.job.reduce.slowstart.completedmaps=1.0" \
    "mapreduce.client.completion.pollinterval=500" \
    "mapreduce.shuffle.port=$SHUFFLE_PORT" \
    "mapreduce.jobhistory.address=$HOST:$JHS_PORT" \
    "yarn.app.mapreduce.am.staging-dir=/tmp/hadoop-yarn/staging"
  write_log4j "$ETC"
}
