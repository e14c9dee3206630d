# gnuplot script written by iclprobe compare; rerun with: gnuplot plots.gp
set datafile separator ','
set key outside right top noenhanced
set grid
set logscale y
set format y '10^{%L}'
set terminal pngcairo size 1000,600
set output 'spd_cell0.png'
set title 'n0: SPD / d to each learner (3 seeds, 95% intervals over seeds, then prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell0.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell0.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.0625', 'spd_cell0.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.111111111', 'spd_cell0.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.25', 'spd_cell0.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.444444444'
set terminal svg size 1000,600
set output 'spd_cell0.svg'
set title 'n0: SPD / d to each learner (3 seeds, 95% intervals over seeds, then prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell0.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell0.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.0625', 'spd_cell0.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.111111111', 'spd_cell0.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.25', 'spd_cell0.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.444444444'
set terminal pngcairo size 1000,600
set output 'spd_cell1.png'
set title 'n1_16: SPD / d to each learner (3 seeds, 95% intervals over seeds, then prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell1.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell1.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.0625', 'spd_cell1.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.111111111', 'spd_cell1.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.25', 'spd_cell1.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.444444444'
set terminal svg size 1000,600
set output 'spd_cell1.svg'
set title 'n1_16: SPD / d to each learner (3 seeds, 95% intervals over seeds, then prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell1.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell1.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.0625', 'spd_cell1.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.111111111', 'spd_cell1.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.25', 'spd_cell1.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.444444444'
set terminal pngcairo size 1000,600
set output 'spd_cell2.png'
set title 'n1_9: SPD / d to each learner (3 seeds, 95% intervals over seeds, then prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell2.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell2.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.0625', 'spd_cell2.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.111111111', 'spd_cell2.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.25', 'spd_cell2.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.444444444'
set terminal svg size 1000,600
set output 'spd_cell2.svg'
set title 'n1_9: SPD / d to each learner (3 seeds, 95% intervals over seeds, then prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell2.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell2.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.0625', 'spd_cell2.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.111111111', 'spd_cell2.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.25', 'spd_cell2.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.444444444'
set terminal pngcairo size 1000,600
set output 'spd_cell3.png'
set title 'n1_4: SPD / d to each learner (3 seeds, 95% intervals over seeds, then prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell3.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell3.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.0625', 'spd_cell3.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.111111111', 'spd_cell3.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.25', 'spd_cell3.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.444444444'
set terminal svg size 1000,600
set output 'spd_cell3.svg'
set title 'n1_4: SPD / d to each learner (3 seeds, 95% intervals over seeds, then prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell3.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell3.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.0625', 'spd_cell3.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.111111111', 'spd_cell3.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.25', 'spd_cell3.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.444444444'
set terminal pngcairo size 1000,600
set output 'spd_cell4.png'
set title 'n4_9: SPD / d to each learner (3 seeds, 95% intervals over seeds, then prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell4.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell4.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.0625', 'spd_cell4.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.111111111', 'spd_cell4.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.25', 'spd_cell4.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.444444444'
set terminal svg size 1000,600
set output 'spd_cell4.svg'
set title 'n4_9: SPD / d to each learner (3 seeds, 95% intervals over seeds, then prompts)' noenhanced
set xlabel 'k (examples in context)'
set ylabel 'SPD / d'
plot 'spd_cell4.csv' index 0 using 1:2:3:4 with yerrorlines lw 2 title 'ols', 'spd_cell4.csv' index 1 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.0625', 'spd_cell4.csv' index 2 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.111111111', 'spd_cell4.csv' index 3 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.25', 'spd_cell4.csv' index 4 using 1:2:3:4 with yerrorlines lw 2 title 'ridge:0.444444444'
