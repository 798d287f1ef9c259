#%Module1.0

## NCCL 2.18.3 modulefile

proc ModulesHelp { } {
    puts stderr "NCCL 2.18.3"
    setenv NCCL_IGNORED_IN_HELP 1
}

module-whatis "Sets up NCCL 2.18.3 in your environment"

set version 2.18.3
set nccl_root /apps/nccl/nccl_2.18.3-1+cuda12.1_x86_64

prepend-path LD_LIBRARY_PATH $nccl_root/lib
prepend-path CPATH $nccl_root/include
setenv NCCL_HOME $nccl_root
setenv NCCL_VERSION $version
# setenv NCCL_DEBUG INFO
setenv NCCL_IB_SL 1
setenv NCCL_SOCKET_IFNAME {ib0}
setenv NCCL_TOPO_FILE ${nccl_root}/topo.xml
