#!/bin/bash
#SBATCH -J nccl-4n
#SBATCH -N 4
#SBATCH --ntasks-per-node=8   # one rank per GPU
#SBATCH --gpus-per-node=8

srun -N 4 --ntasks-per-node=8 -w gpu-a[001-004] --mpi=pmix /opt/nccl-tests/build/all_reduce_perf -b 8 -e 8G -f 2 -g 1 -n 50
srun -N 4 --ntasks-per-node=1 torchrun --nnodes 4 --nproc-per-node=8 --rdzv-backend=c10d --rdzv-endpoint=gpu-a001:29500 train.py
